"""Build Exchange objects the way the decoder would, for tracker and findings scenarios."""

from __future__ import annotations

from fetchtool.exchange import Exchange, ForgottenPartition, RequestPartition, ResponsePartition


class Capture:
    """A scripted capture: each call adds one exchange with increasing frames and times."""

    def __init__(self, file: str = "test.pcap", holds_empty_fetches: bool = False) -> None:
        """``holds_empty_fetches``: answer a fetch that finds nothing after its MaxWaitMs (500), as Kafka does;
        by default every answer takes 5 ms."""
        self.file = file
        self.holds_empty_fetches = holds_empty_fetches
        self.frame = 0
        self.t = 1_700_000_000.0
        self.exchanges: list[Exchange] = []

    def fetch(self, *, client="10.0.0.1:50000", broker="10.0.0.9:9092", conn=1, client_id="consumer-1",
              version=12, session_id=0, epoch=-1, partitions=(("t", 0, 0),), forgotten=(), error=0,
              response_session_id=0, response=None, missing_response=False, max_bytes=52428800,
              throttle=0, gap=1, overlap_next=False, software=None, max_wait_ms=500, min_bytes=1) -> Exchange:
        """partitions: (topic, partition, fetch_offset); response: [(topic, partition, hw, records_bytes, error)]."""
        self.frame += 1
        req_frame = self.frame
        self.t += 0.01
        ts = self.t
        empty = not error and not throttle and max_wait_ms > 0 and min_bytes > 0 and (
            response is None or not any(r[3] or r[4] for r in response))
        if missing_response:
            resp_frame = resp_ts = None
        else:
            self.frame += gap
            self.t += 0.5 if empty and self.holds_empty_fetches else 0.005
            resp_frame, resp_ts = self.frame, self.t
        rparts = tuple(RequestPartition(t, None, p, off, 1048576, -1, -1, -1) for t, p, off in partitions)
        fparts = tuple(ForgottenPartition(t, None, p) for t, p in forgotten)
        if missing_response:
            resp = None
        elif error:
            resp = ()
        elif response is None:
            resp = tuple(ResponsePartition(t, None, p, 0, off, off, 0, -1, -1, -1, 0, 0, 0, None)
                         for t, p, off in partitions)
        else:
            resp = tuple(ResponsePartition(t, None, p, e, hw, hw, 0, -1, -1, -1, rb, 1 if rb else 0, 1 if rb else 0,
                                           "none" if rb else None) for t, p, hw, rb, e in response)
        ex = Exchange(
            file=self.file, conn=conn, request_frame=req_frame, response_frame=resp_frame, ts=ts, response_ts=resp_ts,
            client=client, broker=broker, api_key=1, api_version=version, correlation_id=req_frame,
            client_id=client_id, client_software=software, replica_id=-1, session_id=session_id,
            session_epoch=epoch, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes, isolation_level=0,
            rack_id=None,
            error_code=None if missing_response else error,
            response_session_id=None if missing_response else response_session_id,
            throttle_time_ms=None if missing_response else throttle, request_bytes=100,
            response_bytes=None if missing_response else 100, request_partitions=rparts,
            forgotten_partitions=fparts, response_partitions=resp,
        )
        self.exchanges.append(ex)
        return ex
