"""kombu's filesystem transport (the embedded broker of `make run`, REDIS_URL unset) with atomic messages.

Why: kombu 5.7.0's ``filesystem.Channel._put`` opens the message file under its final name, then takes an flock and
writes; ``_get`` lists the folder, moves a file whose name ends ``.<queue>.msg`` away and parses it, without the
lock. A consumer that moves the file between its creation and the end of the write reads it half-written, and
``loads`` raises ``JSONDecodeError``, which no one catches: the worker process exits (issue 31, seen twice under
`make run`; runstack restarted it, and the message was gone with it). Besides, with ``store_processed`` off a taken
file is moved to the system's temporary folder, a copy and a delete when that is another filesystem.

Here:

- a message is written to a hidden temporary name in the same folder (``.<uuid>.tmp``: its name never ends
  ``.<queue>.msg``, so no reader lists it as a message), flushed, then renamed to its kombu name: a rename within
  one folder is atomic, so a reader sees the whole file or nothing;
- a reader takes a message by renaming it into a hidden folder beside the queue (``.taken``, same filesystem: one
  rename, so of several consumers exactly one gets it), reads it, then deletes it (or keeps it in
  ``processed_folder`` when ``store_processed`` is set);
- a message that cannot be parsed anyway (written by an older gangweb, or damaged) is logged with its file name and
  set aside as ``<name>.unreadable`` in the ``.taken`` folder, and the next message is read: a worker never dies on
  one;
- an exchange table (``control_folder``, written in place under an flock by kombu) read empty or half-written while
  being created is read again a few times before it counts as empty.

Selected by ``CELERY_BROKER_TRANSPORT = "gangweb.filebroker:Transport"`` with ``filesystem://`` (gangweb/settings.py).
The Redis transport's own fix lives in gangweb/broker.py.
"""
from __future__ import annotations

import logging
import os
import shutil
import time
import uuid
from queue import Empty

from kombu.transport import filesystem as kombu_fs
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads

log = logging.getLogger(__name__)

TAKEN_FOLDER = ".taken"  # inside data_folder_in: where a reader moves a message it took
TEMP_SUFFIX = ".tmp"
UNREADABLE_SUFFIX = ".unreadable"
TABLE_READS = 5  # tries of an exchange table read empty or half-written (it is being created)


class Channel(kombu_fs.Channel):
    """kombu's filesystem channel whose messages are written atomically and whose reader skips (and logs) a message
    it cannot parse (see the module docstring)."""

    def _put(self, queue, payload, **kwargs):
        """Put `payload` onto `queue`: written under a temporary name, then renamed to the message's name.

        Raises kombu's ChannelError when the folder cannot be written."""
        folder = self.data_folder_out
        # Nanoseconds of the wall clock, 19 digits until the year 2286: names sort as numbers, and across a restart
        # (kombu's own names use time.monotonic(), which starts again at boot and sorts as text).
        name = f"{time.time_ns():019d}_{uuid.uuid4()}.{queue}.msg"
        temp = os.path.join(folder, f".{uuid.uuid4().hex}{TEMP_SUFFIX}")
        try:
            with open(temp, "wb") as f:
                f.write(str_to_bytes(dumps(payload)))
                f.flush()
                os.fsync(f.fileno())  # on disk before the name appears: a machine crash leaves no empty message
            os.rename(temp, os.path.join(folder, name))
        except OSError as exc:
            try:
                os.unlink(temp)
            except OSError:
                pass
            raise kombu_fs.ChannelError(f"Cannot add file {name!r} to directory") from exc

    def _taken_folder(self) -> str:
        folder = os.path.join(self.data_folder_in, TAKEN_FOLDER)
        os.makedirs(folder, exist_ok=True)
        return folder

    def _get(self, queue):
        """The next whole message of `queue` (oldest name first); raises Empty when there is none. A message that
        cannot be parsed is logged and set aside, and the next one is read."""
        suffix = f"{queue}.msg"
        taken = self._taken_folder()
        for filename in sorted(os.listdir(self.data_folder_in)):
            if filename.startswith(".") or filename.partition(".")[2] != suffix:
                continue
            path = os.path.join(taken, filename)
            try:
                os.rename(os.path.join(self.data_folder_in, filename), path)
            except OSError:
                continue  # another consumer took it first
            try:
                with open(path, "rb") as f:
                    payload = f.read()
            except OSError as exc:
                raise kombu_fs.ChannelError(f"Cannot read file {path!r} from queue.") from exc
            try:
                message = loads(bytes_to_str(payload))
            except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
                log.error("broker: message %s of queue %s cannot be read (%s, %d bytes); set aside as %s%s",
                          filename, queue, exc, len(payload), path, UNREADABLE_SUFFIX)
                os.replace(path, path + UNREADABLE_SUFFIX)
                continue
            self._done_with(path)
            return message
        raise Empty()

    def _done_with(self, path: str) -> None:
        """Delete a message read whole, or keep it in `processed_folder` when `store_processed` is set."""
        try:
            if self.store_processed:
                shutil.move(path, self.processed_folder)
            else:
                os.unlink(path)
        except OSError as exc:
            log.warning("broker: a read message could not be removed (%s): %s", path, exc)

    def get_table(self, exchange):
        """kombu's exchange table of `exchange`, read again while it is empty or half-written (being created)."""
        for attempt in range(TABLE_READS):
            try:
                return super().get_table(exchange)
            except ValueError:
                if attempt == TABLE_READS - 1:
                    log.error("broker: the table of exchange %r cannot be read; no queue bound to it gets this "
                              "message", exchange)
                    return []
                time.sleep(0.01 * (attempt + 1))
        return []


class Transport(kombu_fs.Transport):
    """kombu's filesystem transport with :class:`Channel` (atomic messages, unreadable ones skipped)."""

    Channel = Channel
    # kombu keeps the virtual broker state (declared exchanges and bindings) on the class: this one's own.
    global_state = kombu_fs.virtual.BrokerState()
