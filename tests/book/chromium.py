"""Drive Debian's headless Chromium over the DevTools protocol, through a pipe.

``--remote-debugging-pipe`` makes Chromium read protocol commands from file descriptor 3 and
write replies and events to descriptor 4, as NUL-terminated JSON: no debugging port is opened
and no websocket client is needed. The browser gets a fresh profile and every switch that keeps
it from talking to the network on its own; :meth:`Chromium.open` also blocks every http(s) and
websocket request of a page and records it, so a test can fail on any request that would have
left the machine.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
    "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
    "--host-resolver-rules=MAP * ~NOTFOUND", "--remote-debugging-pipe",
)
"""How the browser is started: headless, no sandbox (root in CI), nothing of its own on the
network, and every host name resolving to nothing."""

BLOCKED = ["http://*", "https://*", "ws://*", "wss://*", "ftp://*"]

CANDIDATES = ("chromium", "chromium-browser", "google-chrome")


def find() -> str | None:
    """The Chromium executable: ``$KERNEL_BOOK_CHROMIUM``, else Debian's ``chromium``."""
    chosen = os.environ.get("KERNEL_BOOK_CHROMIUM")
    if chosen:
        return chosen if Path(chosen).is_file() else None
    return next((p for p in map(shutil.which, CANDIDATES) if p), None)


class ProtocolError(RuntimeError):
    """Chromium answered a command with an error, or stopped answering."""


@dataclass
class Page:
    """One tab: its protocol session and what it reported since it was opened."""

    browser: Chromium
    session: str
    target: str
    events: list[dict[str, Any]] = field(default_factory=list)

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """Send a command to this tab and return its result."""
        return self.browser.send(method, params, session=self.session)

    def evaluate(self, expression: str) -> Any:
        """Evaluate JavaScript in the page (awaiting a promise) and return its JSON value."""
        reply = self.send("Runtime.evaluate", expression=expression, returnByValue=True,
                          awaitPromise=True)
        if "exceptionDetails" in reply:
            raise ProtocolError(f"script failed: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def resize(self, width: int, height: int = 900) -> None:
        """Lay the page out for a viewport of ``width`` CSS pixels (a phone below 600)."""
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=width < 600)

    def navigate(self, url: str, timeout: float = 60) -> None:
        """Load ``url`` and wait for its load event and for the network to go quiet."""
        start = len(self.events)
        self.send("Page.navigate", url=url)
        self.browser.wait(lambda: any(e["method"] == "Page.loadEventFired"
                                      for e in self.events[start:]), timeout)
        self.browser.settle(0.3)

    def screenshot(self, stem: Path, tile: int = 12000) -> list[Path]:
        """Write the whole page as PNGs ``<stem>-1.png``, ``-2.png``, ... of ``tile`` pixels
        height each, and return them.

        The viewport is made as tall as the page for the capture (Chromium's capture beyond
        the viewport misplaces the theme's sticky sidebars), then set back.
        """
        width, height = self.evaluate("[document.documentElement.clientWidth,"
                                      " document.documentElement.scrollHeight]")
        self.resize(width, height)
        self.browser.settle(0.3)
        height = self.evaluate("document.documentElement.scrollHeight")
        stem.parent.mkdir(parents=True, exist_ok=True)
        written = []
        for n, top in enumerate(range(0, height, tile), start=1):
            clip = {"x": 0, "y": top, "width": width, "height": min(tile, height - top),
                    "scale": 1}
            data = self.send("Page.captureScreenshot", format="png", clip=clip)["data"]
            path = stem.parent / f"{stem.name}-{n}.png"
            path.write_bytes(base64.b64decode(data))
            written.append(path)
        self.resize(width)
        return written

    def close(self) -> None:
        """Close the tab."""
        self.browser.send("Target.closeTarget", {"targetId": self.target})


class Chromium:
    """A headless Chromium with a fresh profile, spoken to through its debugging pipe."""

    def __init__(self, executable: str) -> None:
        self.profile = tempfile.mkdtemp(prefix="kernel-book-chromium-")
        self.log = open(Path(self.profile) / "stderr.log", "wb")
        to_browser, self._write = os.pipe()
        self._read, from_browser = os.pipe()

        def descriptors() -> None:  # in the child: the pipe's ends become fds 3 and 4
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_browser, from_browser)]
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        # close_fds runs after preexec_fn and keeps only pass_fds: 3 and 4
        self.process = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={self.profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log,
            preexec_fn=descriptors, pass_fds=(3, 4),
        )
        os.close(to_browser)
        os.close(from_browser)
        self._buffer = b""
        self._next = 0
        self.pages: dict[str, Page] = {}
        self.stray: list[dict[str, Any]] = []

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the browser and remove its profile."""
        try:
            self.send("Browser.close", timeout=10)
        except (ProtocolError, OSError):
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for fd in (self._read, self._write):
            try:
                os.close(fd)
            except OSError:
                pass
        self.log.close()
        shutil.rmtree(self.profile, ignore_errors=True)

    def _receive(self, timeout: float) -> dict[str, Any] | None:
        """One message from the browser, or None when none came within ``timeout``."""
        deadline = time.monotonic() + timeout
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._read], [], [], left)[0]:
                return None
            chunk = os.read(self._read, 1 << 20)
            if not chunk:
                err = Path(self.log.name).read_text(errors="replace")[-2000:]
                raise ProtocolError(f"Chromium closed its pipe (exit {self.process.poll()}): "
                                    f"{err}")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def _dispatch(self, message: dict[str, Any]) -> None:
        page = self.pages.get(message.get("sessionId", ""))
        (page.events if page else self.stray).append(message)

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None,
             timeout: float = 60) -> dict[str, Any]:
        """Send one command and return its result, keeping the events that arrive meanwhile."""
        self._next += 1
        command: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            command["sessionId"] = session
        os.write(self._write, json.dumps(command).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            message = self._receive(max(0.0, deadline - time.monotonic()))
            if message is None:
                raise ProtocolError(f"{method}: no answer within {timeout} s")
            if message.get("id") == self._next:
                if "error" in message:
                    raise ProtocolError(f"{method}: {message['error']}")
                return message.get("result", {})
            self._dispatch(message)

    def wait(self, done: Any, timeout: float) -> None:
        """Read events until ``done()`` holds; raise after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while not done():
            left = deadline - time.monotonic()
            if left <= 0:
                raise ProtocolError(f"timed out after {timeout} s")
            message = self._receive(left)
            if message is not None:
                self._dispatch(message)

    def settle(self, quiet: float) -> None:
        """Read events until none has come for ``quiet`` seconds."""
        while (message := self._receive(quiet)) is not None:
            self._dispatch(message)

    def open(self, width: int = 1400) -> Page:
        """A new tab that reports console messages, errors and requests, with every request
        to a network address blocked."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget",
                            {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session, target)
        self.pages[session] = page
        for domain in ("Page", "Runtime", "Log", "Network"):
            page.send(f"{domain}.enable")
        page.send("Network.setBlockedURLs", urls=BLOCKED)
        page.resize(width)
        return page
