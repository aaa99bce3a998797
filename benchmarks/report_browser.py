"""Headless Chromium driven over the DevTools protocol on a pipe (--remote-debugging-pipe).

The pipe needs no port, no websocket library and no polling of stderr: the browser reads
commands on fd 3 and writes replies and events on fd 4, each a JSON message ending in NUL.
One browser serves several pages (starting Chromium is the slow part on a small machine).

    with Browser() as b:
        page = b.open(path)          # waits for #render-status[data-done]
        page.errors                  # console errors, exceptions, failed or network loads
        page.screenshot(png_path)
        page.eval("document.title")
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-extensions", "--disable-dev-shm-usage", "--hide-scrollbars", "--mute-audio",
         "--remote-debugging-pipe")


def find_chromium() -> str | None:
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


class BrowserError(RuntimeError):
    pass


class Page:
    def __init__(self, browser: "Browser", session: str, target: str):
        self.browser, self.session, self.target = browser, session, target
        self.errors: list[str] = []
        self.requests: list[str] = []

    def send(self, method: str, params: dict | None = None, timeout_s: float = 60.0) -> dict:
        return self.browser.send(method, params, session=self.session, timeout_s=timeout_s)

    def eval(self, expression: str, timeout_s: float = 60.0):
        res = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True}, timeout_s)
        if "exceptionDetails" in res:
            raise BrowserError(f"evaluate {expression!r}: {res['exceptionDetails'].get('text')}")
        return res["result"].get("value")

    def screenshot(self, path: str | os.PathLike, selector: str | None = None, *, first_screen: bool = False) -> Path:
        """The whole page, the element matched by `selector`, or (first_screen) what the first viewport shows."""
        params = {"format": "png", "captureBeyondViewport": not first_screen}
        if first_screen:
            w, h = self.eval("[window.innerWidth, window.innerHeight]")
            params["clip"] = {"x": 0, "y": 0, "width": w, "height": h, "scale": 1}
        elif selector:
            rect = self.eval(f"(function(){{var r=document.querySelector({json.dumps(selector)}).getBoundingClientRect();"
                             "return [r.left + window.scrollX, r.top + window.scrollY, r.width, r.height];})()")
            params["clip"] = {"x": rect[0], "y": rect[1], "width": rect[2], "height": rect[3], "scale": 1}
        res = self.send("Page.captureScreenshot", params, 120.0)
        Path(path).write_bytes(base64.b64decode(res["data"]))
        return Path(path)

    def on_event(self, msg: dict) -> None:
        method, p = msg.get("method"), msg.get("params", {})
        if method == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            self.errors.append(f"exception: {d.get('text')} {d.get('exception', {}).get('description', '')}".strip())
        elif method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            self.errors.append("console.error: " + " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", [])))
        elif method == "Log.entryAdded" and p["entry"].get("level") == "error":
            self.errors.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}".strip())
        elif method == "Network.requestWillBeSent":
            self.requests.append(p["request"]["url"])
        elif method == "Network.loadingFailed":
            self.errors.append(f"load failed: {p.get('errorText')}")


class Browser:
    def __init__(self, width: int = 1400, height: int = 1000):
        exe = find_chromium()
        if exe is None:
            raise BrowserError("no chromium on PATH")
        self.width, self.height = width, height
        self.profile = tempfile.mkdtemp(prefix="stallcase-chromium-")
        to_browser_r, self._w = os.pipe()
        self._r, from_browser_w = os.pipe()

        def wire():  # in the child: the protocol pipe is fds 3 (commands in) and 4 (replies out)
            # Move both ends out of the way first: either may already sit on fd 3 or 4.
            a, b = os.dup(to_browser_r), os.dup(from_browser_w)
            hi_a, hi_b = os.dup2(a, 100), os.dup2(b, 101)
            os.dup2(hi_a, 3)
            os.dup2(hi_b, 4)

        self.proc = subprocess.Popen([exe, *FLAGS, f"--user-data-dir={self.profile}", f"--window-size={width},{height}"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     preexec_fn=wire, pass_fds=(3, 4))
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._ids = itertools.count(1)
        self._replies: dict[int, queue.Queue] = {}
        self._pages: dict[str, Page] = {}
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        buf = b""
        while True:
            try:
                chunk = os.read(self._r, 1 << 20)
            except OSError:
                return
            if not chunk:
                return
            buf += chunk
            while b"\0" in buf:
                raw, buf = buf.split(b"\0", 1)
                msg = json.loads(raw)
                if "id" in msg:
                    with self._lock:
                        q = self._replies.get(msg["id"])
                    if q is not None:
                        q.put(msg)
                else:
                    page = self._pages.get(msg.get("sessionId"))
                    if page is not None:
                        page.on_event(msg)

    def send(self, method: str, params: dict | None = None, *, session: str | None = None, timeout_s: float = 60.0) -> dict:
        mid = next(self._ids)
        q: queue.Queue = queue.Queue()
        with self._lock:
            self._replies[mid] = q
        msg = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        try:
            reply = q.get(timeout=timeout_s)
        except queue.Empty:
            raise BrowserError(f"{method}: no reply in {timeout_s} s") from None
        finally:
            with self._lock:
                self._replies.pop(mid, None)
        if "error" in reply:
            raise BrowserError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def open(self, path: str | os.PathLike, *, timeout_s: float = 60.0) -> tuple[Page, float]:
        """Load a file and wait until its script reports the drawing done. Returns (page, load seconds)."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session, target)
        self._pages[session] = page
        for domain in ("Runtime", "Log", "Page", "Network"):
            page.send(f"{domain}.enable")
        page.send("Emulation.setDeviceMetricsOverride", {"width": self.width, "height": self.height,
                                                         "deviceScaleFactor": 1, "mobile": False})
        t0 = time.monotonic()
        page.send("Page.navigate", {"url": Path(path).resolve().as_uri()}, timeout_s)
        while True:
            done = page.eval("(function(){var s=document.getElementById('render-status');"
                             "return s && (s.dataset.done || s.dataset.error) ? 1 : 0;})()")
            if done:
                break
            if time.monotonic() - t0 > timeout_s:
                raise BrowserError(f"{path}: drawing not done within {timeout_s} s")
            time.sleep(0.05)
        return page, time.monotonic() - t0

    def close_page(self, page: Page) -> None:
        self.send("Target.closeTarget", {"targetId": page.target})

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout_s=10)
        except BrowserError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._w)
        os.close(self._r)
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
