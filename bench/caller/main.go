// Command caller times RunFunction calls the way Crossplane makes them: from Go, with
// grpc-go's default client options (at most 4 MiB received unless -max-recv-mib is given).
// bench/fleet_scale.py drives it over stdin, one command a line:
//
//	load PATH   read an encoded RunFunctionRequest; answers "ok"
//	call N      send it to the Nth address of the command line; answers the round trip in
//	            milliseconds, or "error CODE: MESSAGE"
//
// The request goes out as the bytes read and the response is kept as bytes: Crossplane's own
// encoding and decoding happen on its side of the call, so neither is timed here.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/status"
)

const runFunction = "/apiextensions.fn.proto.v1.FunctionRunnerService/RunFunction"

// encoded passes messages through as the bytes they already are. Registered under the name
// of gRPC's default codec, it replaces it in this process, so the calls go out exactly as
// Crossplane's do (content type application/grpc, no codec forced on the call).
type encoded struct{}

func (encoded) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }

// Unmarshal keeps the buffer it is given: gRPC hands the codec a copy of its own.
func (encoded) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = data
	return nil
}

func (encoded) Name() string { return "proto" }

func init() { encoding.RegisterCodec(encoded{}) }

func main() {
	maxRecvMiB := flag.Int("max-recv-mib", 0, "raise the client's receive limit (0: grpc-go's 4 MiB)")
	timeout := flag.Duration("timeout", 10*time.Minute, "deadline of each call")
	flag.Parse()

	var options []grpc.CallOption
	if *maxRecvMiB > 0 {
		options = append(options, grpc.MaxCallRecvMsgSize(*maxRecvMiB<<20))
	}
	var conns []*grpc.ClientConn
	for _, address := range flag.Args() {
		conn, err := grpc.NewClient(address,
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			// A connection kept for the whole run: a long row never reconnects mid-call.
			grpc.WithIdleTimeout(0),
			grpc.WithDefaultCallOptions(options...))
		if err != nil {
			fmt.Fprintf(os.Stderr, "cannot dial %s: %v\n", address, err)
			os.Exit(2)
		}
		conns = append(conns, conn)
	}

	var request []byte
	lines := bufio.NewScanner(os.Stdin)
	out := bufio.NewWriter(os.Stdout)
	for lines.Scan() {
		command, argument, _ := strings.Cut(lines.Text(), " ")
		switch command {
		case "load":
			data, err := os.ReadFile(argument)
			if err != nil {
				fmt.Fprintf(out, "error cannot read %s: %v\n", argument, err)
				break
			}
			request = data
			fmt.Fprintln(out, "ok")
		case "call":
			n, err := strconv.Atoi(argument)
			if err != nil || n < 0 || n >= len(conns) {
				fmt.Fprintf(out, "error no address number %q\n", argument)
				break
			}
			fmt.Fprintln(out, call(conns[n], request, *timeout))
		default:
			fmt.Fprintf(out, "error unknown command %q\n", command)
		}
		out.Flush()
	}
}

func call(conn *grpc.ClientConn, request []byte, timeout time.Duration) string {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var response []byte
	start := time.Now()
	err := conn.Invoke(ctx, runFunction, &request, &response)
	elapsed := time.Since(start)
	if err != nil {
		s := status.Convert(err)
		return fmt.Sprintf("error %s: %s", s.Code(), strings.ReplaceAll(s.Message(), "\n", " "))
	}
	return strconv.FormatFloat(float64(elapsed.Nanoseconds())/1e6, 'f', 3, 64)
}
