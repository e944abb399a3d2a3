"""A DNS server that answers every name with 127.0.0.1, for the providers' private namespace.

provider-helm pulls charts from the public repositories' hosts, and Helm's OCI client talks to
a registry's API host, which may differ from the host in the chart's reference. Instead of
listing hosts, the providers' mount namespace gets a resolv.conf naming this server, so every
name they look up resolves to the local chart host (charthost.py), which mints a certificate
for whatever name the TLS handshake asks for. Only the providers see it.
"""

from __future__ import annotations

import argparse
import socket
import struct
import sys

TYPE_A = 1
CLASS_IN = 1
LOOPBACK = bytes([127, 0, 0, 1])


def answer(query: bytes) -> bytes | None:
    """The response to one DNS query message; None for a message that is not a query."""
    if len(query) < 12:
        return None
    ident, flags, questions = struct.unpack("!HHH", query[:6])
    if flags & 0x8000 or questions != 1:  # a response, or not exactly one question
        return None
    end = 12
    while end < len(query) and query[end] != 0:
        end += query[end] + 1
    end += 1
    if end + 4 > len(query):
        return None
    qtype, qclass = struct.unpack("!HH", query[end : end + 4])
    question = query[12 : end + 4]
    recursion_desired = flags & 0x0100
    # QR=1, AA=1, RA=1, RCODE=0: an authoritative answer (none for AAAA and other types,
    # so clients fall back to the IPv4 address).
    response_flags = 0x8000 | 0x0400 | recursion_desired | 0x0080
    records = b""
    count = 0
    if qtype == TYPE_A and qclass == CLASS_IN:
        # the name by pointer to the question (offset 12), TTL 5 s, 4 bytes of address
        records = struct.pack("!HHHIH", 0xC00C, TYPE_A, CLASS_IN, 5, 4) + LOOPBACK
        count = 1
    header = struct.pack("!HHHHHH", ident, response_flags, 1, count, 0, 0)
    return header + question + records


def serve(address: str, port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind((address, port))
        print(f"answering every A query with 127.0.0.1 on {address}:{port}", flush=True)
        while True:
            query, client = sock.recvfrom(4096)
            response = answer(query)
            if response is not None:
                sock.sendto(response, client)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--address", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=53)
    args = parser.parse_args(argv)
    try:
        serve(args.address, args.port)
    except OSError as error:
        sys.exit(f"cannot serve DNS on {args.address}:{args.port}: {error}")


if __name__ == "__main__":
    main()
