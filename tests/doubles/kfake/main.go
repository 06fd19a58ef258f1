// Command kfake starts franz-go's kfake, a fake Kafka cluster in Go, on loopback for the
// scenario catalogue's fidelity table (tests/catalogue/doubles.py): one broker, the
// group settings the catalogue asks for, its state under -data when given (so that a
// restart on the same folder is a broker restart).
//
//	kfake [-port N] [-data DIR] [-group-min-session-ms MS] [-group-max-session-ms MS]
//
// Prints "bootstrap HOST:PORT" once it listens, then runs until stdin closes or reads
// "close". kfake has no group.initial.rebalance.delay.ms: a JoinGroup completes the join
// phase as Kafka would without that delay (kfake's groups.go).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

func main() {
	port := flag.Int("port", 0, "port to listen on (0: any free port)")
	data := flag.String("data", "", "keep the cluster's state in this folder (kfake.DataDir)")
	minSession := flag.Int("group-min-session-ms", 6000, "group.min.session.timeout.ms")
	maxSession := flag.Int("group-max-session-ms", 1800000, "group.max.session.timeout.ms")
	flag.Parse()
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.Ports(*port),
		kfake.GroupMinSessionTimeout(time.Duration(*minSession) * time.Millisecond),
		kfake.GroupMaxSessionTimeout(time.Duration(*maxSession) * time.Millisecond),
	}
	if *data != "" {
		opts = append(opts, kfake.DataDir(*data))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(2)
	}
	defer c.Close()
	fmt.Printf("bootstrap %s\n", c.ListenAddrs()[0])
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if strings.TrimSpace(in.Text()) == "close" {
			return
		}
	}
}
