// grpcpeer - a grpc-go peer for test/integration/test_grpc.sh: real gRPC on both sides of
// node/grpc.c, with a raw bytes codec so no generated code is needed. Test infrastructure only.
//
//	grpcpeer unary SOCK METHOD MSG    one call; prints "code=N msg=M resp=R"
//	grpcpeer stream SOCK METHOD MSG   a server stream; prints "msg=R" per message, then the code
//	grpcpeer cancel SOCK METHOD MSG   a server stream cancelled after its first message
//	grpcpeer bench SOCK METHOD N      N unary calls on one connection; prints the median
//	grpcpeer serve SOCK               serves /t.T/Echo ("go:" + request) and /t.T/Fail
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

type raw struct{}

func (raw) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (raw) Unmarshal(d []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), d...)
	return nil
}
func (raw) Name() string { return "raw" }

func dial(sock string) *grpc.ClientConn {
	cc, err := grpc.NewClient("unix://"+sock,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(raw{})))
	if err != nil {
		fmt.Fprintln(os.Stderr, "dial:", err)
		os.Exit(2)
	}
	return cc
}

func printStatus(err error) {
	s := status.Convert(err)
	fmt.Printf("code=%d msg=%q\n", s.Code(), s.Message())
}

func unary(sock, method, msg string) {
	cc := dial(sock)
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, resp := []byte(msg), []byte(nil)
	err := cc.Invoke(ctx, method, &req, &resp)
	if err == nil {
		fmt.Printf("resp=%q\n", resp)
	}
	printStatus(err)
}

func stream(sock, method, msg string, cancelAfterFirst bool) {
	cc := dial(sock)
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cs, err := cc.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, method)
	if err != nil {
		printStatus(err)
		return
	}
	req := []byte(msg)
	if err = cs.SendMsg(&req); err == nil {
		err = cs.CloseSend()
	}
	for err == nil {
		var m []byte
		if err = cs.RecvMsg(&m); err == nil {
			fmt.Printf("msg=%q\n", m)
			if cancelAfterFirst {
				cancel()
				time.Sleep(200 * time.Millisecond) // the RST_STREAM goes out
				fmt.Println("cancelled")
				return
			}
		}
	}
	if errors.Is(err, io.EOF) {
		err = nil
	}
	printStatus(err)
}

func bench(sock, method string, n int) {
	cc := dial(sock)
	defer cc.Close()
	ds := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		req, resp := []byte("ping"), []byte(nil)
		t0 := time.Now()
		if err := cc.Invoke(context.Background(), method, &req, &resp); err != nil {
			printStatus(err)
			os.Exit(1)
		}
		ds = append(ds, time.Since(t0))
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	fmt.Printf("calls=%d median_us=%d p90_us=%d\n", n, ds[n/2].Microseconds(), ds[n*9/10].Microseconds())
}

func serve(sock string) {
	_ = os.Remove(sock)
	lis, err := net.Listen("unix", sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		os.Exit(2)
	}
	s := grpc.NewServer(grpc.ForceServerCodec(raw{}),
		grpc.UnknownServiceHandler(func(_ any, st grpc.ServerStream) error {
			method, _ := grpc.MethodFromServerStream(st)
			var req []byte
			if err := st.RecvMsg(&req); err != nil {
				return err
			}
			switch method {
			case "/t.T/Echo":
				resp := append([]byte("go:"), req...)
				return st.SendMsg(&resp)
			case "/t.T/Fail":
				return status.Error(codes.InvalidArgument, "go says no: 100% \"sure\"\n")
			}
			return status.Errorf(codes.Unimplemented, "unknown method %s", method)
		}))
	fmt.Println("serving")
	_ = s.Serve(lis)
}

func main() {
	a := os.Args
	if len(a) < 3 {
		fmt.Fprintln(os.Stderr, "usage: grpcpeer unary|stream|cancel|bench|serve SOCK ...")
		os.Exit(2)
	}
	switch {
	case a[1] == "serve":
		serve(a[2])
	case len(a) == 5 && a[1] == "unary":
		unary(a[2], a[3], a[4])
	case len(a) == 5 && a[1] == "stream":
		stream(a[2], a[3], a[4], false)
	case len(a) == 5 && a[1] == "cancel":
		stream(a[2], a[3], a[4], true)
	case len(a) == 5 && a[1] == "bench":
		n, err := strconv.Atoi(a[4])
		if err != nil || n < 1 {
			os.Exit(2)
		}
		bench(a[2], a[3], n)
	default:
		os.Exit(2)
	}
}
