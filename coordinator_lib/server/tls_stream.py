"""A TLS connection that two threads use at once: one reads, one writes.

Why: a pgwire connection has a reader thread (it notices a client that goes
away while rows stream) beside the session thread that writes, but OpenSSL
forbids using one SSL object from two threads at a time. So the socket is
non-blocking, every SSL call holds one lock, and a thread that must wait
(for data, or for room to send) waits in select() without the lock.

    stream = TlsStream(context.wrap_socket(sock, server_side=True))
    rfile = stream.makefile()
    stream.sendall(b"...")
"""

from __future__ import annotations

import contextlib
import io
import select
import socket
import ssl
import threading


class TlsStream:
    """The part of the socket interface pgwire's connection uses."""

    def __init__(self, tls: ssl.SSLSocket) -> None:
        self.tls = tls
        self.lock = threading.Lock()
        self.timeout: float | None = tls.gettimeout()
        tls.setblocking(False)

    def settimeout(self, timeout: float | None) -> None:
        """How long a read or write may wait (None: forever)."""
        self.timeout = timeout

    def _wait(self, want_read: bool) -> None:
        readers, writers = ([self.tls], []) if want_read else ([], [self.tls])
        ready = select.select(readers, writers, [], self.timeout)
        if not any(ready):
            raise TimeoutError("TLS connection timed out")

    def recv_into(self, buffer: bytearray | memoryview) -> int:
        while True:
            with self.lock:
                try:
                    return self.tls.recv_into(buffer)
                except ssl.SSLWantReadError:
                    want_read = True
                except ssl.SSLWantWriteError:
                    want_read = False
            self._wait(want_read)

    def sendall(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            with self.lock:
                try:
                    view = view[self.tls.send(view) :]
                    continue
                except ssl.SSLWantReadError:
                    want_read = True
                except ssl.SSLWantWriteError:
                    want_read = False
            self._wait(want_read)

    def makefile(self, buffering: int = 64 * 1024) -> io.BufferedReader:
        return io.BufferedReader(_RawReader(self), buffering)

    def shutdown(self, how: int) -> None:
        """Say goodbye in TLS (close_notify: clients such as libpq's cancel
        treat a bare EOF as an error), then shut the TCP connection down,
        which wakes a thread waiting to read."""
        with self.lock, contextlib.suppress(ssl.SSLError, OSError, ValueError):
            self.tls.unwrap()  # sends ours; the peer's is not waited for
        socket.socket.shutdown(self.tls, how)

    def close(self) -> None:
        with self.lock:
            self.tls.close()


class _RawReader(io.RawIOBase):
    def __init__(self, stream: TlsStream) -> None:
        self.stream = stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        return self.stream.recv_into(buffer)
