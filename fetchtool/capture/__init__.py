"""The capture layer: capture files in, ordered TCP stream events out (contract: events.py).

- reader.py      read_records(path): pcap/pcapng (gzip too) packet records over mmap; CaptureError.
- links.py       link layers (Ethernet+VLANs, SLL/SLL2, raw, null, loop) -> IP -> TCP header fields.
- packets.py     iter_segments(path, stats) -> events.Segment; CaptureStats (counts and counted warnings).
- reassembly.py  TcpReassembler: feed(segment) / finish(frame, ts) -> StreamData / StreamGap / ConnectionClosed.
- streams.py     stream_set_events(reads): a file's (or a rotated set's) events, read in a forked child on
                 large captures.
- rotation.py    rotation_groups(paths): files that are one capture cut in pieces (tcpdump -C / -G), the rule
                 both engines share.
- writer.py      PcapWriter, PcapNgWriter, TcpConversation and the frame builders (frames.py): for tests,
                 generators, benchmarks and synthetic captures.
"""
