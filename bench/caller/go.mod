// The benchmark's caller (bench/fleet_scale.py): grpc-go and its HTTP/2 stack at the versions
// Crossplane core v2.3.3 pins (realplane/go/crossplane/go.mod).
module modelplane.dev/bench/caller

go 1.25.11

require google.golang.org/grpc v1.80.0

require (
	golang.org/x/net v0.55.0 // indirect
	golang.org/x/sys v0.45.0 // indirect
	golang.org/x/text v0.37.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20260401024825-9d38bb4040a9 // indirect
	google.golang.org/protobuf v1.36.11 // indirect
)
