// Signs in to e2b-mcp the way a remote MCP client does, with the official TypeScript SDK's OAuth client:
// the first request is refused with 401, the SDK reads the Protected Resource Metadata it points to, discovers
// the authorization server, and runs the authorization-code flow with PKCE (S256); this script plays the user
// at the provider's HTML login page (GET the form, POST the user name and password, follow the redirects back
// to the redirect URI). The SDK then exchanges the code for an access token and the client calls tools with it.
//
//   node oauth.mjs <MCP URL> <client id> <redirect URI> <user> <password> <token file> [token-only]
//
// Prints one JSON line per step; the last is {"ok":true,...}. With token-only it stops once it has the token.
// The access token is written to <token file>, and the ID token the provider sent beside it to <token
// file>.id (mode 0600), for the caller's own checks; neither is printed. Any failed check exits 1 with the reason
// on stderr.
import { writeFileSync } from "node:fs";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";

const [mcpURL, clientID, redirectURI, user, password, tokenFile, mode] = process.argv.slice(2);

function fail(message) {
  process.stderr.write(`oauth.mjs: ${message}\n`);
  process.exit(1);
}

function check(cond, message) {
  if (!cond) fail(message);
}

function step(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}

if (!tokenFile) fail("usage: oauth.mjs <MCP URL> <client id> <redirect URI> <user> <password> <token file>");

// signIn plays the user at the provider: from the authorization URL to the code on the redirect URI.
async function signIn(authorizationURL, expectedState) {
  let res = await fetch(authorizationURL, { redirect: "manual" });
  check(res.status === 302 || res.status === 303, `authorization endpoint answered ${res.status}: ${await res.text()}`);
  const loginURL = new URL(res.headers.get("location"), authorizationURL);
  res = await fetch(loginURL);
  const page = await res.text();
  check(res.ok && page.includes('name="password"'), `no login form at ${loginURL.pathname}: ${res.status}`);
  const id = /name="id" value="([^"]+)"/.exec(page)?.[1];
  check(id, "the login form has no request id");
  const form = new URL(/action="([^"]+)"/.exec(page)?.[1] ?? "/login/username", loginURL);
  res = await fetch(form, {
    method: "POST",
    redirect: "manual",
    headers: { "Content-Type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ id, username: user, password }),
  });
  let next = res.headers.get("location");
  check(next, `the login was not accepted (${res.status}): ${await res.text()}`);
  // Follow the provider's own redirects until one leads to the redirect URI.
  for (let hop = 0; hop < 5 && !next.startsWith(redirectURI); hop++) {
    res = await fetch(new URL(next, form), { redirect: "manual" });
    next = res.headers.get("location");
    check(next, `the provider stopped redirecting (${res.status}): ${await res.text()}`);
  }
  const back = new URL(next);
  check(back.searchParams.get("state") === expectedState, "the state came back changed");
  const code = back.searchParams.get("code");
  check(code, `no code on the redirect: ${back.search}`);
  return code;
}

const store = {};
let authorizationURL;
const provider = {
  get redirectUrl() { return redirectURI; },
  get clientMetadata() {
    return {
      client_name: "e2b-mcp end-to-end test",
      redirect_uris: [redirectURI],
      grant_types: ["authorization_code"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  },
  state() { store.state = crypto.randomUUID(); return store.state; },
  clientInformation() { return { client_id: clientID }; },
  tokens() { return store.tokens; },
  saveTokens(tokens) { store.tokens = tokens; },
  redirectToAuthorization(url) { authorizationURL = url; },
  saveCodeVerifier(v) { store.verifier = v; },
  codeVerifier() { return store.verifier; },
};

const url = new URL(mcpURL);
let transport = new StreamableHTTPClientTransport(url, { authProvider: provider });
let client = new Client({ name: "e2b-mcp-oauth-e2e", version: "1" });
try {
  await client.connect(transport);
  fail("the server let an unauthenticated client in");
} catch (err) {
  check(err instanceof UnauthorizedError, `want UnauthorizedError before sign-in, got ${err}`);
}
check(authorizationURL, "the SDK never sent the user to the authorization server");
const params = authorizationURL.searchParams;
check(params.get("code_challenge_method") === "S256" && params.get("code_challenge"), "no PKCE S256 challenge");
check(params.get("resource") === mcpURL, `resource parameter ${params.get("resource")}, want ${mcpURL}`);
step({ step: "authorize", authorization_endpoint: authorizationURL.origin + authorizationURL.pathname });

const code = await signIn(authorizationURL, store.state);
await transport.finishAuth(code);
check(store.tokens?.access_token, "no access token after the code exchange");
writeFileSync(tokenFile, store.tokens.access_token, { mode: 0o600 });
if (store.tokens.id_token) writeFileSync(`${tokenFile}.id`, store.tokens.id_token, { mode: 0o600 });
step({ step: "token", token_type: store.tokens.token_type });
if (mode === "token-only") {
  step({ ok: true });
  process.exit(0);
}

transport = new StreamableHTTPClientTransport(url, { authProvider: provider });
client = new Client({ name: "e2b-mcp-oauth-e2e", version: "1" });
await client.connect(transport);
const created = await client.callTool({ name: "e2b_create_sandbox", arguments: { title: `oauth ${user}` } });
check(!created.isError, `e2b_create_sandbox failed: ${JSON.stringify(created.content)}`);
const sandboxID = created.structuredContent?.sandbox_id;
check(sandboxID, "no sandbox_id");
const listed = await client.callTool({ name: "e2b_list_sandboxes", arguments: {} });
check(!listed.isError, `e2b_list_sandboxes failed: ${JSON.stringify(listed.content)}`);
const ids = (listed.structuredContent?.sandboxes ?? []).map((s) => s.sandbox_id);
await client.close();
step({ ok: true, sandbox_id: sandboxID, sandboxes: ids });
