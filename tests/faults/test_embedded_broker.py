"""The embedded broker (kombu's filesystem transport as gangweb/filebroker.py writes and reads it) flooded by
several processes at once: every message arrives exactly once, whole, and no consumer dies (issue 31, part 5).

Under `make run` a worker exited twice with JSONDecodeError: kombu's reader took a message file its writer had
created but not finished writing. Here 4 producer processes publish 400 messages each while 2 consumer processes
take them concurrently (so a message can be lost, doubled, or read half-written in all the ways the folder allows),
with an unparseable message file dropped among them. No cluster, no Django: seconds.
"""
from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path
from queue import Empty

import pytest
from kombu import Connection

from gangweb import filebroker

pytestmark = [pytest.mark.faults]

PRODUCERS, PER_PRODUCER, CONSUMERS = 4, 400, 2
QUEUE = "flood"


def connection(folder: str, transport: str = "gangweb.filebroker:Transport") -> Connection:
    return Connection("filesystem://", transport=transport, transport_options={
        "data_folder_in": folder, "data_folder_out": folder, "control_folder": os.path.join(folder, "control"),
        "processed_folder": os.path.join(folder, "processed"), "store_processed": False})


def produce(folder: str, producer: int) -> None:
    with connection(folder) as conn:
        queue = conn.SimpleQueue(QUEUE, serializer="json")
        for n in range(PER_PRODUCER):
            queue.put({"producer": producer, "n": n, "pad": "x" * (n % 7) * 700})  # some span several writes


def consume(folder: str, out: str, producers_done) -> None:
    """Take messages until the producers are done and the queue is empty; write what was received to `out`."""
    got = []
    with connection(folder) as conn:
        queue = conn.SimpleQueue(QUEUE, serializer="json")
        while True:
            finished = producers_done.is_set()  # read before the get: an Empty after it means drained
            try:
                message = queue.get(timeout=0.5)
            except Empty:
                if finished:
                    break
                continue
            got.append([message.payload["producer"], message.payload["n"]])
            message.ack()
    Path(out).write_text(json.dumps(got))


def test_a_flood_from_several_processes_arrives_exactly_once_and_no_consumer_dies(tmp_path):
    folder = str(tmp_path / "queue")
    os.makedirs(folder)
    # A message written by something else and cut short: set aside, never fatal.
    Path(folder, f"1_{'0' * 8}.{QUEUE}.msg").write_text('{"body": "eyJ')
    ctx = multiprocessing.get_context("spawn")
    done = ctx.Event()
    consumers = [ctx.Process(target=consume, args=(folder, str(tmp_path / f"got-{i}.json"), done))
                 for i in range(CONSUMERS)]
    producers = [ctx.Process(target=produce, args=(folder, p)) for p in range(PRODUCERS)]
    for proc in consumers + producers:
        proc.start()
    for proc in producers:
        proc.join(300)
    done.set()
    for proc in consumers:
        proc.join(300)

    assert [p.exitcode for p in producers] == [0] * PRODUCERS
    assert [c.exitcode for c in consumers] == [0] * CONSUMERS  # no consumer died
    received = [tuple(m) for i in range(CONSUMERS) for m in json.loads((tmp_path / f"got-{i}.json").read_text())]
    sent = {(p, n) for p in range(PRODUCERS) for n in range(PER_PRODUCER)}
    assert len(received) == len(sent) and set(received) == sent  # 0 lost, 0 doubled
    assert all(len(json.loads((tmp_path / f"got-{i}.json").read_text())) for i in range(CONSUMERS))  # both took
    taken = Path(folder, filebroker.TAKEN_FOLDER)
    assert sorted(os.listdir(taken)) == [f"1_{'0' * 8}.{QUEUE}.msg{filebroker.UNREADABLE_SUFFIX}"]
    assert not [n for n in os.listdir(folder) if n.endswith((".msg", filebroker.TEMP_SUFFIX))]  # nothing left over
    print(f"\n[faults] embedded broker flood: {PRODUCERS} producers x {PER_PRODUCER} messages, {CONSUMERS} "
          f"consumers: {len(received)} received of {len(sent)}, 0 doubled, 0 consumer deaths, 1 unreadable set aside")


def test_a_half_written_message_kills_kombus_own_reader_and_is_set_aside_by_gangwebs(tmp_path):
    """What the flood guards against, shown without a race: kombu's own filesystem reader raises on a message file
    cut short (its writer had not finished), gangweb's logs it, sets it aside and reads the next one."""
    folder = str(tmp_path)
    Path(folder, f"1_{'a' * 8}.{QUEUE}.msg").write_text('{"body": "eyJ')
    with connection(folder, "filesystem") as conn, pytest.raises(ValueError):
        conn.SimpleQueue(QUEUE, serializer="json").get(timeout=1)

    # "0_" sorts before every name the writer gives (19 digits of time.time_ns()), so the reader meets it first.
    Path(folder, f"0_{'b' * 8}.{QUEUE}.msg").write_text('{"body": "eyJ')
    with connection(folder) as conn:
        queue = conn.SimpleQueue(QUEUE, serializer="json")
        queue.put({"n": 1})
        message = queue.get(timeout=1)
        assert message.payload == {"n": 1}
        message.ack()
    assert os.listdir(Path(folder, filebroker.TAKEN_FOLDER)) == [
        f"0_{'b' * 8}.{QUEUE}.msg{filebroker.UNREADABLE_SUFFIX}"]
