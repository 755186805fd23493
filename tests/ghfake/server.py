"""The HTTP side: a Werkzeug WSGI app on 127.0.0.1 that routes each request to an
OpenAPI operation, validates it, runs the handler, validates the answer and logs it."""

from __future__ import annotations

import json
import re
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from typing import Any, NamedTuple
from urllib.parse import parse_qs, urlsplit

from werkzeug.serving import WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response

from . import handlers_app, handlers_git  # noqa: F401  (they register their handlers)
from .factories import Factory
from .handlers import HANDLERS, Ctx, Reply
from .objects import Renderer
from .spec import Spec
from .state import ApiError, State

DOCS = "https://docs.github.com/rest"
WRITE_METHODS = {"POST", "PATCH", "PUT", "DELETE"}
SECONDARY_MESSAGE = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again. "
    "If you reach out to GitHub Support for help, please include the request ID {rid}."
)


class LogEntry(NamedTuple):
    method: str
    path: str
    status: int
    json_body: Any
    at: float = 0.0  # time.monotonic() when the reply was made (benchmarks/pr_path.py times the path)


@dataclass
class Exchange:
    """Everything about one request, for detailed assertions (``fake.exchanges``)."""

    method: str
    path: str
    query: dict[str, list[str]]
    request_body: Any
    status: int
    response_body: Any
    operation_id: str | None
    injected: bool
    seconds: float
    token: str = ""  # the Authorization credential it carried (a token, or the App's JWT)


@dataclass
class Injection:
    method: str
    path_regex: re.Pattern[str]
    status: int
    headers: dict[str, str]
    body: Any
    times: int
    after_effect: bool
    hits: int = 0


@dataclass
class FakeServer:
    spec: Spec
    state: State
    strict_query: bool = True
    default_login: str = "agent-d[bot]"
    tokens: dict[str, str] = field(default_factory=dict)  # token -> login
    # installation tokens: token -> when it stops working (time.time()); using it later is a violation
    token_expires: dict[str, float] = field(default_factory=dict)
    app: handlers_app.AppSide = field(default_factory=handlers_app.AppSide)
    log: list[LogEntry] = field(default_factory=list)
    exchanges: list[Exchange] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    injections: list[Injection] = field(default_factory=list)
    latencies: list[tuple[str, re.Pattern[str], float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._httpd = make_server("127.0.0.1", 0, self._wsgi, threaded=True, request_handler=_QuietHandler)
        self.port = self._httpd.server_port
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.factory = Factory(self.spec, self.base_url)
        self.render = Renderer(self.state, self.factory)
        self._thread: threading.Thread | None = None
        self._remaining = 5000
        self._log_lock = threading.Lock()

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> FakeServer:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="ghfake", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread:
            self._thread.join(timeout=5)

    # ------------------------------------------------------------------ injection
    def inject(
        self,
        method: str,
        path_regex: str,
        status: int,
        headers: dict[str, str] | None = None,
        body: Any = None,
        times: int = 1,
        after_effect: bool = False,
    ) -> Injection:
        """Answer the next ``times`` matching requests with ``status``.

        ``after_effect=True`` performs the operation first (the object is created) and
        only then answers ``status``: a client that retries blindly makes a duplicate.
        """
        if body is None and status >= 400:
            body = {"message": f"injected {status}", "documentation_url": DOCS}
        inj = Injection(
            method.upper(), re.compile(path_regex), status, dict(headers or {}), body, times, after_effect
        )
        self.injections.append(inj)
        return inj

    def inject_primary_rate_limit(
        self, method: str, path_regex: str, reset_in: int = 1, times: int = 1
    ) -> Injection:
        reset = int(time.time()) + reset_in
        headers = {
            "X-RateLimit-Limit": "5000",
            "X-RateLimit-Remaining": "0",
            "X-RateLimit-Used": "5000",
            "X-RateLimit-Reset": str(reset),
            "X-RateLimit-Resource": "core",
        }
        body = {"message": "API rate limit exceeded for installation ID 1.", "documentation_url": DOCS}
        return self.inject(method, path_regex, 403, headers, body, times)

    def inject_secondary_rate_limit(
        self, method: str, path_regex: str, retry_after: int | None = 1, times: int = 1
    ) -> Injection:
        headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
        body = {
            "message": SECONDARY_MESSAGE.format(rid=uuid.uuid4().hex[:16].upper()),
            "documentation_url": DOCS,
        }
        return self.inject(method, path_regex, 403, headers, body, times)

    def add_latency(self, method: str, path_regex: str, seconds: float) -> None:
        """Deliver matching answers ``seconds`` after the state was read (holding no lock), as a
        slow network does: concurrent clients all see the state before any of them writes."""
        self.latencies.append((method.upper(), re.compile(path_regex), seconds))

    def _wait_latency(self, method: str, path: str) -> None:
        for m, pattern, seconds in self.latencies:
            if m in (method, "*") and pattern.search(path):
                time.sleep(seconds)
                return

    def _take_injection(self, method: str, path: str) -> Injection | None:
        for inj in self.injections:
            if inj.hits < inj.times and inj.method in (method, "*") and inj.path_regex.search(path):
                inj.hits += 1
                return inj
        return None

    # ------------------------------------------------------------------ request pipeline
    def _wsgi(self, environ: dict[str, Any], start_response: Any) -> Any:
        return self._handle(Request(environ))(environ, start_response)

    def _handle(self, request: Request) -> Response:
        t0 = time.perf_counter()
        raw = request.environ.get("RAW_URI") or request.environ.get("REQUEST_URI") or request.full_path
        split = urlsplit(raw)
        path, query = split.path, parse_qs(split.query, keep_blank_values=True)
        method = request.method.upper()
        body: Any = None
        data = request.get_data()
        op_id: str | None = None
        injected = False
        try:
            if data:
                try:
                    body = json.loads(data)
                except ValueError:
                    body = data.decode("utf-8", "replace")
                    raise _Violation(400, f"{method} {path}: body is not JSON") from None
            inj = self._take_injection(method, path)
            if inj is not None and not inj.after_effect:
                injected = True
                reply = Reply(inj.status, inj.body, dict(inj.headers))
            else:
                reply, op_id = self._operate(method, path, query, body, request)
                if inj is not None:
                    injected = True
                    reply = Reply(inj.status, inj.body, dict(inj.headers))
        except _Violation as v:
            self.violations.append(v.message)
            reply = Reply(v.status, {"message": f"ghfake: {v.message}", "documentation_url": DOCS})
        self._wait_latency(method, path)  # after the state was read: the answer is already stale
        self._remaining = max(0, self._remaining - 1)
        headers = {
            "X-RateLimit-Limit": "5000",
            "X-RateLimit-Remaining": str(self._remaining),
            "X-RateLimit-Used": str(5000 - self._remaining),
            "X-RateLimit-Reset": str(int(time.time()) + 3600),
            "X-RateLimit-Resource": "core",
            "X-GitHub-Request-Id": uuid.uuid4().hex[:20].upper(),
            "X-GitHub-Api-Version-Selected": "2022-11-28",
            **reply.headers,
        }
        text = "" if reply.body is None else json.dumps(reply.body)
        with self._log_lock:
            self.log.append(LogEntry(method, path, reply.status, body, time.monotonic()))
            self.exchanges.append(
                Exchange(
                    method,
                    path,
                    query,
                    body,
                    reply.status,
                    reply.body,
                    op_id,
                    injected,
                    time.perf_counter() - t0,
                    _bearer(request),
                )
            )
        return Response(
            text, status=reply.status, headers=headers, content_type="application/json; charset=utf-8"
        )

    def _operate(
        self, method: str, path: str, query: dict[str, list[str]], body: Any, request: Request
    ) -> tuple[Reply, str | None]:
        found = self.spec.match(method, path)
        if found is None:
            raise _Violation(501, f"{method} {path}: no such operation in the REST description")
        op, raw_params = found
        typed_path, typed_query, problems = self.spec.validate_params(
            op, raw_params, query, self.strict_query
        )
        if op.body_schema_pointer is not None:
            if body is None and op.body_required:
                problems.append("request body is required")
            elif body is not None:
                problems += [
                    f"body {e}" for e in self.spec.schema_errors(op.body_schema_pointer, body, "write")
                ]
        elif body is not None and body != {}:
            problems.append("a request body was sent but the operation takes none")
        if problems:
            raise _Violation(422, f"{method} {path} ({op.operation_id}): " + "; ".join(problems))
        handler = HANDLERS.get(op.operation_id)
        if handler is None:
            raise _Violation(501, f"{method} {path}: {op.operation_id} exists but the fake does not model it")
        token = _bearer(request)
        if method in WRITE_METHODS and not token:
            raise _Violation(401, f"{method} {path}: write without Authorization")
        expires = self.token_expires.get(token)
        if expires is not None and time.time() >= expires:
            raise _Violation(401, f"{method} {path}: an installation token used after it expired")
        login = self.tokens.get(token, self.default_login)
        with self.state.lock:
            self.state.begin_request()
            user = self.state.user(login)
            ctx = Ctx(
                self.state,
                self.render,
                self.base_url,
                path,
                typed_path,
                typed_query,
                body,
                user,
                self.tokens,
                bearer=token,
                server=self,
            )
            try:
                reply = handler(ctx)
            except ApiError as e:
                err: dict[str, Any] = {
                    "message": e.message,
                    "documentation_url": DOCS,
                    "status": str(e.status),
                }
                if e.errors:
                    err["errors"] = e.errors
                if e.status in (400, 422):
                    self.violations.append(
                        f"{method} {path} ({op.operation_id}): GitHub would answer {e.status}: "
                        f"{e.message} {e.errors or ''}".rstrip()
                    )
                return Reply(e.status, err), op.operation_id
            except Exception as e:  # a bug in the fake: fail loudly, keep serving
                tb = traceback.format_exc(limit=-3)
                raise _Violation(500, f"{op.operation_id}: the fake crashed: {e!r}\n{tb}") from e
        documented, pointer = self.spec.response_schema_pointer(op, reply.status)
        if not documented:
            raise _Violation(
                500, f"{op.operation_id}: the fake answered {reply.status}, which is not documented"
            )
        if pointer is not None:
            errors = self.spec.schema_errors(pointer, reply.body, "read")
            if errors:
                raise _Violation(
                    500, f"{op.operation_id}: the fake's {reply.status} answer breaks the schema: {errors}"
                )
        return reply, op.operation_id


class _QuietHandler(WSGIRequestHandler):
    def log_request(self, *args: Any, **kwargs: Any) -> None:  # the fake keeps its own log
        pass


class _Violation(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def _bearer(request: Request) -> str:
    auth = request.headers.get("Authorization", "")
    return auth.split(None, 1)[1] if " " in auth else ""
