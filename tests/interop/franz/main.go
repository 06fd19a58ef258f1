// One franz-go (kgo) consumer for the interop tests: agent.py's command line and
// stdin commands, for franz-go. Prints the records of an observed log
// (spec/OBSERVED.md, without its header), one JSON line each: every rebalance
// callback (an assignment taken on entry, a revocation or loss on exit), every
// commit with its outcome, and "closed" once closed. Reads "close" and
// "commit PARTITION OFFSET" (committed synchronously if the callbacks so far
// say the partition is owned) on stdin.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var (
	out      = json.NewEncoder(os.Stdout)
	outMu    sync.Mutex
	owned    = map[int32]bool{}
	member   string
	instance string
)

func nowMs() float64 { return float64(time.Now().UnixMicro()) / 1000 }

func emit(record map[string]any) {
	outMu.Lock()
	defer outMu.Unlock()
	_ = out.Encode(record)
}

func record(event string, fields map[string]any) {
	r := map[string]any{"t_ms": nowMs(), "member": member, "event": event}
	for k, v := range fields {
		r[k] = v
	}
	emit(r)
}

type partition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

// callback records a rebalance callback and keeps “owned“; t is its entry for an
// assignment, its exit for a revocation or a loss.
func callback(kind string, t float64, parts map[string][]int32) {
	list := []partition{}
	for topic, ps := range parts {
		for _, p := range ps {
			list = append(list, partition{topic, p})
			outMu.Lock()
			if kind == "assigned" {
				owned[p] = true
			} else {
				delete(owned, p)
			}
			outMu.Unlock()
		}
	}
	sort.Slice(list, func(i, j int) bool {
		return list[i].Topic < list[j].Topic || list[i].Topic == list[j].Topic && list[i].Partition < list[j].Partition
	})
	r := map[string]any{"t_ms": t, "member": member, "event": kind, "partitions": list}
	if instance != "" {
		r["group_instance_id"] = instance
	}
	emit(r)
}

func balancer(strategy string) kgo.GroupBalancer {
	switch strategy {
	case "range":
		return kgo.RangeBalancer()
	case "roundrobin":
		return kgo.RoundRobinBalancer()
	case "sticky":
		return kgo.StickyBalancer()
	}
	return kgo.CooperativeStickyBalancer()
}

func main() {
	flag.CommandLine.Init(os.Args[0], flag.ExitOnError)
	bootstrap := flag.String("bootstrap", "", "HOST:PORT")
	group := flag.String("group", "", "group.id")
	topic := flag.String("topic", "", "the topic subscribed to")
	instanceID := flag.String("instance-id", "", "group.instance.id (KIP-345)")
	sessionMs := flag.Int("session-ms", 6000, "session.timeout.ms")
	strategy := flag.String("strategy", "cooperative-sticky", "the balancer: cooperative-sticky, sticky, range, roundrobin")
	maxPollMs := flag.Int("max-poll-ms", 300000, "the rebalance timeout (JoinGroup's, as max.poll.interval.ms)")
	protocol := flag.String("group-protocol", "classic", "classic, or consumer (KIP-848: range names the server's range assignor, any other uniform)")
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: agent NAME --bootstrap HOST:PORT --group G --topic T [options]")
		os.Exit(2)
	}
	member = os.Args[1]
	_ = flag.CommandLine.Parse(os.Args[2:])
	instance = *instanceID
	opts := []kgo.Opt{
		kgo.SeedBrokers(*bootstrap), kgo.ClientID(member), kgo.ConsumerGroup(*group), kgo.ConsumeTopics(*topic),
		kgo.SessionTimeout(time.Duration(*sessionMs) * time.Millisecond), kgo.HeartbeatInterval(300 * time.Millisecond),
		kgo.RebalanceTimeout(time.Duration(*maxPollMs) * time.Millisecond),
		kgo.AutoCommitInterval(500 * time.Millisecond), kgo.MetadataMinAge(500 * time.Millisecond), kgo.MetadataMaxAge(time.Second),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			callback("assigned", nowMs(), a)
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, r map[string][]int32) {
			_ = cl.CommitUncommittedOffsets(ctx)
			callback("revoked", nowMs(), r)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, l map[string][]int32) {
			callback("lost", nowMs(), l)
		}),
	}
	if *protocol == "consumer" {
		b := kgo.StickyBalancer() // the server's uniform assignor
		if *strategy == "range" {
			b = kgo.RangeBalancer()
		}
		opts = append(opts, kgo.Balancers(b), kgo.ServerSideBalancer())
	} else {
		opts = append(opts, kgo.Balancers(balancer(*strategy)))
	}
	if instance != "" {
		opts = append(opts, kgo.InstanceID(instance))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		fmt.Println("fatal", err)
		os.Exit(1)
	}
	commands := make(chan string)
	go func() {
		scan := bufio.NewScanner(os.Stdin)
		for scan.Scan() {
			commands <- scan.Text()
		}
	}()
	for {
		select {
		case line := <-commands:
			words := strings.Fields(line)
			if len(words) == 3 && words[0] == "commit" {
				p, _ := strconv.Atoi(words[1])
				offset, _ := strconv.ParseInt(words[2], 10, 64)
				outMu.Lock()
				mine := owned[int32(p)]
				outMu.Unlock()
				if mine {
					commit(cl, *topic, int32(p), offset)
				}
				continue
			}
			cl.Close() // leaves the group (or, with an instance id, does not), its revocations called
			record("closed", nil)
			return
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		cl.PollFetches(ctx)
		cancel()
	}
}

// commit commits “offset“ of the partition synchronously and records its outcome.
func commit(cl *kgo.Client, topic string, p int32, offset int64) {
	sent := nowMs()
	offsets := map[string]map[int32]kgo.EpochOffset{topic: {p: {Epoch: -1, Offset: offset}}}
	var failure error
	cl.CommitOffsetsSync(context.Background(), offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest,
		resp *kmsg.OffsetCommitResponse, err error) {
		failure = err
		if err == nil && resp != nil {
			for _, t := range resp.Topics {
				for _, part := range t.Partitions {
					if part.ErrorCode != 0 {
						failure = fmt.Errorf("%d", part.ErrorCode)
					}
				}
			}
		}
	})
	fields := map[string]any{"offsets": []map[string]any{{"topic": topic, "partition": p, "offset": offset}},
		"outcome": "ok", "sent_ms": sent}
	if failure != nil {
		fields["outcome"], fields["error"] = "error", failure.Error()
	}
	record("commit", fields)
}
