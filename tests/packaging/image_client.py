"""One RunFunction call to a function image, made from inside the image's network namespace.

tests/packaging/test_images.py starts each image in a network namespace of its own, so port 9443
(the port Crossplane dials) is the image's alone: on the host it is also the real plane's
provider-kubernetes webhook, and the two tiers run at the same time. The test runs this script
in that namespace with ``nsenter --net``:

    image_client.py TLS_DIR REQUEST ANSWER

It brings the namespace's loopback up, waits up to 60 s for the function, sends REQUEST (a
serialized RunFunctionRequest) with the client certificate of TLS_DIR and writes the answer to
ANSWER, then makes the same call without a client certificate, which must be refused. Exit 0
when both go so; otherwise a message on stderr and a non-zero exit.
"""

from __future__ import annotations

import fcntl
import socket
import struct
import sys
from pathlib import Path

import grpc
from crossplane.function.proto.v1 import run_function_pb2 as fnv1
from crossplane.function.proto.v1 import run_function_pb2_grpc as grpcv1

PORT = 9443
# <linux/sockios.h> and <net/if.h>: get and set an interface's flags through a struct ifreq
# (16 bytes of name, then a 24-byte union whose first member is the flags).
SIOCGIFFLAGS, SIOCSIFFLAGS, IFF_UP = 0x8913, 0x8914, 0x1
IFREQ = "16sh22x"


def loopback_up() -> None:
    """A new network namespace starts with ``lo`` down: nothing could connect to the function."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        current = fcntl.ioctl(sock, SIOCGIFFLAGS, struct.pack(IFREQ, b"lo", 0))
        flags = struct.unpack(IFREQ, current)[1]
        fcntl.ioctl(sock, SIOCSIFFLAGS, struct.pack(IFREQ, b"lo", flags | IFF_UP))


def channel(tls: Path, client: bool) -> grpc.Channel:
    credentials = grpc.ssl_channel_credentials(
        root_certificates=(tls / "ca.crt").read_bytes(),
        private_key=(tls / "client.key").read_bytes() if client else None,
        certificate_chain=(tls / "client.crt").read_bytes() if client else None,
    )
    return grpc.secure_channel(f"localhost:{PORT}", credentials)


def main(tls: Path, request_file: Path, answer_file: Path) -> int:
    loopback_up()
    request = fnv1.RunFunctionRequest.FromString(request_file.read_bytes())
    with channel(tls, client=True) as mutual:
        try:
            grpc.channel_ready_future(mutual).result(timeout=60)
        except grpc.FutureTimeoutError:
            print(f"nothing answered on localhost:{PORT} within 60 s", file=sys.stderr)
            return 2
        answer = grpcv1.FunctionRunnerServiceStub(mutual).RunFunction(request, timeout=60)
    answer_file.write_bytes(answer.SerializeToString())
    # Without a client certificate the handshake is refused: the server verifies against ca.crt.
    with channel(tls, client=False) as anonymous:
        try:
            grpcv1.FunctionRunnerServiceStub(anonymous).RunFunction(request, timeout=10)
        except grpc.RpcError:
            return 0
    print("a call without a client certificate was answered", file=sys.stderr)
    return 3


if __name__ == "__main__":
    sys.exit(main(*(Path(argument) for argument in sys.argv[1:4])))
