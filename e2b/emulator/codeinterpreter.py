# The emulator's code-interpreter server: what E2B's code-interpreter-v1 template serves on port 49999, answered
# the same way (POST /execute streaming one JSON object a line, /contexts, restart, remove), on Jupyter kernels
# that jupyter_client starts here. The emulator runs it in each sandbox of that template; the tools' tests run the
# same assertions against it and against E2B's real server. Standard library and jupyter_client only.
import datetime
import json
import os
import queue
import re
import select
import socket
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from jupyter_client.manager import KernelManager

ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
KEEPALIVE_SECONDS = 5
# Mime types as the server names them in a result; any other goes under "extra".
FORMATS = {
    "text/plain": "text", "text/html": "html", "text/markdown": "markdown", "image/svg+xml": "svg",
    "image/png": "png", "image/jpeg": "jpeg", "application/pdf": "pdf", "text/latex": "latex",
    "application/json": "json", "application/javascript": "javascript",
}
LANGUAGES = {"js": "javascript", "ts": "typescript"}


class NotFound(Exception):
    pass


class Context:
    def __init__(self, language, cwd):
        if language != "python":
            raise ValueError("no kernel for language %s" % language)
        self.id, self.language, self.cwd = str(uuid.uuid4()), language, cwd
        self.lock = threading.Lock()  # one execution at a time, as a kernel runs them
        self.km = KernelManager(kernel_name="python3")
        self.km.start_kernel(cwd=cwd)
        self.kc = self.km.client()
        self.kc.start_channels()
        self.kc.wait_for_ready(timeout=60)

    def describe(self):
        return {"id": self.id, "language": self.language, "cwd": self.cwd}

    def restart(self):
        with self.lock:
            self.kc.stop_channels()
            self.km.restart_kernel(now=True)
            self.kc = self.km.client()
            self.kc.start_channels()
            self.kc.wait_for_ready(timeout=60)

    def shutdown(self):
        self.kc.stop_channels()
        self.km.shutdown_kernel(now=True)

    def run_silently(self, code):
        msg_id = self.kc.execute(code, silent=True, store_history=False)
        self.wait_idle(msg_id)

    def wait_idle(self, msg_id):
        while True:
            msg = self.kc.get_iopub_msg(timeout=None)
            if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "status" \
                    and msg["content"]["execution_state"] == "idle":
                return

    def execute(self, code, env_vars, send, gone):
        """Runs code, giving each output line to send; gone says when the client has left, which interrupts
        the kernel. The lock is held until the kernel is idle again, so the next execution never meets the
        interrupt."""
        with self.lock:
            if env_vars:
                self.run_silently("import os as __os; __saved = {k: __os.environ.get(k) for k in %r}; "
                                  "__os.environ.update(%r)" % (list(env_vars), env_vars))
            msg_id = self.kc.execute(code)
            waited, interrupted = 0.0, False
            while True:
                try:
                    msg = self.kc.get_iopub_msg(timeout=0.2)
                except queue.Empty:
                    waited += 0.2
                    if not interrupted and gone():
                        self.km.interrupt_kernel()
                        interrupted = True
                    if waited >= KEEPALIVE_SECONDS and not interrupted:
                        waited = 0.0
                        interrupted = not send({"type": "keepalive"}) or interrupted
                    continue
                if msg["parent_header"].get("msg_id") != msg_id:
                    continue
                waited = 0.0
                line = self.output(msg)
                if line is not None and not interrupted and not send(line):
                    self.km.interrupt_kernel()
                    interrupted = True
                if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
                    break
            if env_vars:
                self.run_silently("import os as __os\nfor __k, __v in __saved.items():\n"
                                  "    __os.environ.pop(__k, None) if __v is None else __os.environ.__setitem__(__k, __v)")
            send({"type": "end_of_execution"})

    @staticmethod
    def output(msg):
        kind, content = msg["msg_type"], msg["content"]
        if kind == "execute_input":
            return {"type": "number_of_executions", "execution_count": content["execution_count"]}
        if kind == "stream":
            return {"type": content["name"], "text": content["text"],
                    "timestamp": datetime.datetime.now(datetime.timezone.utc).isoformat()}
        if kind == "error":
            return {"type": "error", "name": content["ename"], "value": content["evalue"],
                    "traceback": ANSI.sub("", "".join(content["traceback"]))}
        if kind in ("execute_result", "display_data"):
            out, extra = {"type": "result"}, {}
            for mime, value in content["data"].items():
                name = FORMATS.get(mime)
                if name is None:
                    extra[mime] = value
                    continue
                if name == "text" and len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                    value = value[1:-1]
                if name in ("png", "jpeg") and isinstance(value, str):
                    value = value.replace("\n", "")
                out[name] = value
            out["extra"] = extra
            out["is_main_result"] = kind == "execute_result"
            return out
        return None


class Contexts:
    def __init__(self, cwd):
        self.cwd = cwd
        self.lock = threading.Lock()
        self.by_id = {}
        self.defaults = {}
        self.default("python")

    def create(self, language, cwd):
        c = Context(language, cwd or self.cwd)
        with self.lock:
            self.by_id[c.id] = c
        return c

    def default(self, language):
        language = LANGUAGES.get(language.lower(), language.lower())
        with self.lock:
            c = self.defaults.get(language)
        if c is None:
            c = self.create(language, None)
            with self.lock:
                self.defaults[language] = c
        return c

    def get(self, id):
        with self.lock:
            c = self.by_id.get(id)
        if c is None:
            raise NotFound("Context %s not found" % id)
        return c

    def remove(self, id):
        c = self.get(id)
        with self.lock:
            self.by_id.pop(id, None)
            for lang, d in list(self.defaults.items()):
                if d is c:
                    del self.defaults[lang]
        c.shutdown()

    def list(self):
        with self.lock:
            return [c.describe() for c in self.by_id.values()]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    contexts = None

    def log_message(self, *args):
        pass

    def text(self, status, body):
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def json(self, value):
        data = json.dumps(value).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                data += self.rfile.read(size)
                self.rfile.readline()
        else:
            data = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if not self.headers.get("Content-Type", "").startswith("application/json"):
            raise ValueError("the body must be JSON (Content-Type: application/json)")
        return json.loads(data or b"null")

    def do_GET(self):
        if self.path == "/health":
            return self.json("OK")
        if self.path == "/contexts":
            return self.json(self.contexts.list())
        self.text(404, "Not Found")

    def do_DELETE(self):
        m = re.fullmatch(r"/contexts/([^/]+)", self.path)
        if not m:
            return self.text(404, "Not Found")
        self.guard(lambda: (self.contexts.remove(m.group(1)), self.json(None)))

    def do_POST(self):
        m = re.fullmatch(r"/contexts/([^/]+)/restart", self.path)
        if m:
            return self.guard(lambda: (self.contexts.get(m.group(1)).restart(), self.json(None)))
        if self.path == "/contexts":
            return self.guard(self.create_context)
        if self.path == "/execute":
            return self.guard(self.execute)
        self.text(404, "Not Found")

    def guard(self, f):
        try:
            f()
        except NotFound as e:
            self.text(404, str(e))
        except (ValueError, KeyError, TypeError) as e:
            self.text(422, str(e))

    def create_context(self):
        req = self.body() or {}
        try:
            c = self.contexts.create(req.get("language") or "python", req.get("cwd"))
        except ValueError as e:
            return self.text(500, "Failed to create context: %s" % e)
        self.json(c.describe())

    def execute(self):
        req = self.body()
        if not isinstance(req, dict) or not isinstance(req.get("code"), str):
            raise ValueError("code is required")
        if req.get("context_id") and req.get("language"):
            return self.text(400, "Only one of context_id or language can be provided")
        if req.get("context_id"):
            c = self.contexts.get(req["context_id"])
        else:
            try:
                c = self.contexts.default(req.get("language") or "python")
            except ValueError as e:
                return self.text(500, "Failed to create context: %s" % e)
        self.send_response(200)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        c.execute(req["code"], req.get("env_vars") or {}, self.send_line, self.client_gone)
        self.close_connection = True

    def send_line(self, obj):
        data = (json.dumps(obj) + "\n").encode()
        try:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            if obj["type"] == "end_of_execution":
                self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            return True
        except (BrokenPipeError, ConnectionResetError):
            return False

    def client_gone(self):
        """Whether the client has closed its connection: readable with nothing to read."""
        try:
            r, _, _ = select.select([self.connection], [], [], 0)
            return bool(r) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True


def main():
    os.environ.pop("E2B_CODE_INTERPRETER", None)  # the script itself, which the emulator passes this way
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 49999
    Handler.contexts = Contexts(os.environ.get("HOME") or "/")
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
