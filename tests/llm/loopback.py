"""An OpenAI-compatible chat endpoint on loopback for the tests: stdlib `http.server` in a thread, serving
`POST /v1/chat/completions` with responses scripted by the test (text, an HTTP error, or a function of the request),
each with usage token counts. Requests are recorded so a test can read what KLineage sent. No network: 127.0.0.1."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

Script = str | dict | Callable[[dict], "str | dict"]


def reply(
    text: str, prompt_tokens: int = 100, completion_tokens: int | None = None, finish: str = "stop", usage: bool = True
) -> dict:
    """A scripted 200 response. Token counts are the script's own numbers, not a model's."""
    body = {
        "id": "chatcmpl-loopback",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "loopback",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}],
    }
    if usage:
        completion = completion_tokens if completion_tokens is not None else max(1, len(text) // 4)
        body["usage"] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion,
            "total_tokens": prompt_tokens + completion,
        }
    return {"status": 200, "body": body}


def error(status: int, message: str = "scripted error") -> dict:
    return {"status": status, "body": {"error": {"message": message, "type": "server_error", "code": None}}}


class Loopback:
    """`with Loopback([...]) as server:` then point the client at `server.base_url`. Each request takes the next
    scripted item; when the script runs out, `default` answers."""

    def __init__(self, script: list[Script] | None = None, default: Script | None = None):
        self.script = list(script or [])
        self.default = default if default is not None else "Nothing to change."
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (the stdlib's name)
                length = int(self.headers.get("Content-Length") or 0)
                request = json.loads(self.rfile.read(length) or b"{}")
                if self.path.rstrip("/") != "/v1/chat/completions":
                    return self._send(error(404, f"no route {self.path}"))
                with outer.lock:
                    outer.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **request})
                    item = outer.script.pop(0) if outer.script else outer.default
                if callable(item):
                    item = item(request)
                self._send(reply(item) if isinstance(item, str) else item)

            def _send(self, response: dict):
                data = json.dumps(response["body"]).encode()
                self.send_response(response["status"])
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):  # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> Loopback:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def prompts(self) -> list[str]:
        """The last user message of every request, in order."""
        return [r["messages"][-1]["content"] for r in self.requests if r.get("messages")]
