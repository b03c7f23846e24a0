// Package policy decides, for every tool call, whether it runs (allow), is refused
// (deny), or waits for a human (require_approval); and keeps the approvals humans
// grant. It knows nothing of MCP, HTTP or E2B: a call is a tool name and its
// arguments.
//
// # File format
//
// A policy is one YAML document:
//
//	default_action: deny            # allow | deny | require_approval; required
//	approver: operator              # client | operator: who answers require_approval;
//	                                # optional (the server decides: see Approver)
//	rules:                          # checked in order; the first match decides
//	  - id: allow-reads             # required, unique: letters, digits, . _ -
//	    when: { targets: [e2b_read_file, e2b_list_sandboxes] }
//	    then: { decision: allow }
//	  - id: no-force-push
//	    when: { target: e2b_exec, command: "*git push*--force*" }
//	    then: { decision: deny, reason: force pushes are not allowed }
//	  - id: delete-needs-approval
//	    when: { target: e2b_manage_sandbox, action: delete }
//	    then: { decision: require_approval, reason: deleting a sandbox needs approval, approver: client }
//
// A call takes the decision of the first rule whose conditions all match (AND), or
// default_action when none does. A condition on an argument the call does not have
// does not match: {command: "rm*"} never matches e2b_read_file, nor an e2b_exec
// call without a command. The server shows the policy the arguments as the tool will
// act on them: the schema's defaults filled in, and each upload_files entry expanded
// to the files it writes.
//
// # Conditions
//
//	target, targets   the tool name: a glob, or a list (any of); "e2b_*" is every tool.
//	                  Use one of the two keys, not both. A name or pattern matching no
//	                  tool is an error.
//	command           e2b_exec's command: a glob or a list (any of). '*' matches any
//	                  run of characters, '/', spaces and newlines included. The glob is
//	                  anchored at both ends: "git push*" does not match
//	                  "cd x && git push"; write "*git push*" for that.
//	path              the sandbox path of e2b_read_file and e2b_write_file, and every
//	                  upload_files[].sandbox_path of e2b_create_sandbox: a glob or a
//	                  list (any of). '*' and '?' stay within one segment; '**' as a
//	                  whole segment spans any number of directories: "/home/user/**"
//	                  is /home/user and everything below it, "**/.env" is a .env
//	                  anywhere. Paths are judged as the sandbox resolves them (see
//	                  SandboxPath): relative to /home/user, "~" expanded, cleaned
//	                  ("/a/../etc" is "/etc", "../../etc" is "/etc"), so a pattern must
//	                  be clean too. An upload without sandbox_path is judged at
//	                  /home/user/NAME, where it lands. When a call has several paths, a rule
//	                  whose decision is allow matches only if every path matches; a
//	                  deny or require_approval rule matches if any path does.
//	action            e2b_manage_sandbox's action: pause, resume or delete, or a list.
//	template          e2b_create_sandbox's template: a glob or a list (any of).
//	count             e2b_fork_sandbox's count: a number (exactly), or a range
//	                  {min: N}, {max: N} or {min: N, max: M}, bounds included.
//	timeout_seconds   a timeout in seconds, same syntax as count: timeout_seconds of
//	                  e2b_create_sandbox and e2b_manage_sandbox, and e2b_exec's
//	                  timeout_ms divided by 1000 (so {max: 60} admits 60000 ms).
//
// Globs: '*', '?', '[abc]', '[a-z]', '[!a]' (or '[^a]'), '\' before a character
// makes it literal. Matching is case-sensitive and linear-time whatever the pattern.
//
// Command and path conditions are guard rails for an assistant that means well, not a
// sandbox: a shell command can always be written another way ("git push -f", a
// script), and e2b_exec reaches any file, as do symlinks and /proc/self/root inside the
// sandbox under names a path rule does not match. The sandbox itself is the isolation
// boundary.
//
// # Validation
//
// Parse is strict, since a policy that silently means something else is a hole:
// unknown keys, unknown decisions or actions, missing or duplicate ids, a rule
// without conditions, a condition that can never hold in its rule (command on
// e2b_read_file), malformed globs, values of the wrong type, YAML aliases and more
// than one document are errors, each reported as "file:line: reason".
package policy
