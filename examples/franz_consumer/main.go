// franz_consumer: a franz-go (twmb/franz-go kgo) consumer for examples/make_kafka_captures.py. It reads the given
// partitions of one topic from the start, or the whole topic as a member of a consumer group, with franz-go's
// defaults otherwise (fetch sessions on), until SIGTERM.
//
//	go build -o franz_consumer . && ./franz_consumer -brokers HOST:PORT -topic T -partitions 0,1 -client-id ID
//	./franz_consumer -brokers HOST:PORT -topic T -group G -client-id ID
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/twmb/franz-go/pkg/kgo"
)

func main() {
	brokers := flag.String("brokers", "127.0.0.1:9092", "bootstrap servers, comma-separated")
	topic := flag.String("topic", "orders", "the topic")
	partitions := flag.String("partitions", "0", "partitions to read, comma-separated")
	clientID := flag.String("client-id", "franz-consumer", "client.id")
	group := flag.String("group", "", "consume the whole topic in this consumer group (-partitions is then ignored)")
	flag.Parse()

	offsets := map[int32]kgo.Offset{}
	for _, p := range strings.Split(*partitions, ",") {
		n, err := strconv.Atoi(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bad partition:", p)
			os.Exit(2)
		}
		offsets[int32(n)] = kgo.NewOffset().AtStart()
	}
	opts := []kgo.Opt{kgo.SeedBrokers(strings.Split(*brokers, ",")...), kgo.ClientID(*clientID)}
	if *group != "" {
		opts = append(opts, kgo.ConsumeTopics(*topic), kgo.ConsumerGroup(*group),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	} else {
		opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{*topic: offsets}))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	records := 0
	for ctx.Err() == nil {
		fetches := cl.PollFetches(ctx)
		fetches.EachError(func(t string, p int32, err error) {
			if ctx.Err() == nil {
				fmt.Fprintf(os.Stderr, "fetch error %s[%d]: %v\n", t, p, err)
			}
		})
		records += fetches.NumRecords()
	}
	cl.Close() // closes its fetch sessions, (id, -1)
	fmt.Printf("records %d\n", records)
}
