"""Headless Chromium driven over the DevTools protocol (CDP), with nothing but
`websockets`: open a page, wait for text, read it, take a screenshot.

Chromium runs with everything that would reach the network switched off
(no component updates, sync, first-run or background networking)."""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

from websockets.sync.client import ClientConnection, connect

CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--no-default-browser-check",
    "--window-size=1600,1200",
)


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Browser:
    """One Chromium process and one page."""

    def __init__(self, executable: str, profile: Path) -> None:
        port = free_port()
        self.process = subprocess.Popen(
            [
                executable,
                *CHROMIUM_FLAGS,
                f"--remote-debugging-port={port}",
                f"--user-data-dir={profile}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._ids = itertools.count(1)
        self._stack = contextlib.ExitStack()
        self.ws: ClientConnection = self._stack.enter_context(
            connect(self._page_socket(port), max_size=None)
        )
        self.call("Page.enable")
        self.call("Runtime.enable")

    def _page_socket(self, port: int) -> str:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=2) as r:
                    pages = [t for t in json.load(r) if t.get("type") == "page"]
                if pages:
                    return str(pages[0]["webSocketDebuggerUrl"])
            except OSError:
                pass
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError("Chromium did not open its DevTools endpoint")
            time.sleep(0.2)

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        id = next(self._ids)
        self.ws.send(json.dumps({"id": id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=60))
            if message.get("id") == id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return dict(message.get("result", {}))

    def open(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def text(self) -> str:
        return str(self.evaluate("document.body ? document.body.innerText : ''") or "")

    def wait_for_text(self, needles: list[str], timeout_s: float = 90.0) -> str:
        """The page's visible text once it contains every needle."""
        deadline = time.monotonic() + timeout_s
        text = ""
        while time.monotonic() < deadline:
            text = self.text()
            if all(n in text for n in needles):
                return text
            time.sleep(0.5)
        missing = [n for n in needles if n not in text]
        raise AssertionError(f"page never showed {missing}; it showed:\n{text[:2000]}")

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png")["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def click_button(self, label: str) -> None:
        self.evaluate(
            "for (const b of document.querySelectorAll('button')) {"
            f" if (b.innerText.trim() === {json.dumps(label)}) {{ b.click(); }} }}"
        )

    def evaluate(self, expression: str) -> Any:
        return self.call("Runtime.evaluate", expression=expression).get("result", {}).get("value")

    def close(self) -> None:
        try:
            self._stack.close()
        finally:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
