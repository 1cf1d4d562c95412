"""Every frame crossing the test bed's bridge, as a listener on the wire would see them: a raw
packet socket (AF_PACKET, root) bound to the bridge, read by a thread, bounded in bytes and time."""
from __future__ import annotations

import socket
import threading
import time

ALL_PROTOCOLS = 0x0003   # ETH_P_ALL
MAX_BYTES = 256 * 1024 * 1024
MAX_SECONDS = 120.0


class Capture:
    def __init__(self, interface: str):
        self.interface = interface
        self.data = bytearray()
        self.frames = 0
        self._stop = threading.Event()
        self._socket = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ALL_PROTOCOLS))
        self._socket.bind((interface, 0))
        self._socket.settimeout(0.1)
        self._thread = threading.Thread(target=self._read, name="bridge-capture", daemon=True)

    def __enter__(self) -> "Capture":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        time.sleep(0.3)   # the last replies' frames
        self._stop.set()
        self._thread.join(5)
        self._socket.close()

    def _read(self) -> None:
        deadline = time.monotonic() + MAX_SECONDS
        while not self._stop.is_set() and time.monotonic() < deadline and len(self.data) < MAX_BYTES:
            try:
                frame = self._socket.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            self.data += frame
            self.frames += 1

    def saw(self, marker: bytes) -> bool:
        return marker in self.data
