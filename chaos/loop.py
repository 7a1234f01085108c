"""An asyncio event loop on a private daemon thread, for synchronous drivers (the experiment runner)
that host asyncio chaos parts (proxies, the nemesis)."""
from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable, Coroutine

__all__ = ["LoopThread"]


class LoopThread:
    def __init__(self, name: str = "chaos-loop") -> None:
        self.name = name
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    def start(self) -> "LoopThread":
        if self._thread is not None:
            return self

        def main() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self.loop = loop
            self._ready.set()
            loop.run_forever()
            # let cancelled tasks finish their cleanup
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for t in pending:
                t.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.close()

        self._thread = threading.Thread(target=main, name=self.name, daemon=True)
        self._thread.start()
        self._ready.wait()
        return self

    def run(self, coro: Coroutine, timeout: float | None = None) -> Any:
        """Run a coroutine on the loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def submit(self, coro: Coroutine):
        """Schedule a coroutine on the loop; returns a concurrent.futures.Future."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call(self, fn: Callable, *args, timeout: float | None = 10) -> Any:
        """Call a plain function on the loop's thread and return its result."""
        async def _c():
            return fn(*args)
        return self.run(_c(), timeout)

    def stop(self) -> None:
        if self.loop is None or self._thread is None:
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(30)
        self._thread = None
        self.loop = None
