"""One Arrow batch of a JetStream write as the plain Python lists the publish loops take.

How it works: runs in the write tasks, once per Arrow record batch (Spark hands the sink
batches of ``spark.sql.execution.arrow.maxRecordsPerBatch`` rows, 10,000 by default).
Every check and conversion that can be done on a whole column is done there with
``pyarrow.compute`` (string payloads become binary without a copy, null payloads
``b""``, null subjects the ``subject`` option, ``msgIdColumns`` joined with ``:``, null or
empty message ids found), so the per-row loops of the two publish modes only call
``publish``: one ``to_pylist`` per column and no per-row branch or allocation of ours
beyond the headers dict where a ``headers`` column exists. No state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import pyarrow as pa
import pyarrow.compute as pc

from nats_sync.errors import InvalidArgumentError

SINK = "jetstream sink"


class WriteSettings(Protocol):
    """What a publish mode reads of the sink's settings (``sink.SinkSettings``, which
    calls the modes' modules: a protocol, so they do not import it back)."""

    @property
    def servers(self) -> tuple[str, ...]:
        """The servers written to."""
        ...

    @property
    def subject(self) -> str | None:
        """The subject of rows without one."""
        ...

    @property
    def msg_id_columns(self) -> tuple[str, ...]:
        """The columns a row's message id is made of."""
        ...

    @property
    def timeout(self) -> float:
        """Seconds to wait for an acknowledgement."""
        ...


@dataclass
class RowColumns:
    """The rows of one Arrow batch, column by column, ready to publish.

    Attributes:
        data: each row's payload (``b""`` for a null).
        subjects: each row's subject (the ``subject`` option where the column is null),
            or None when every row goes to the ``subject`` option (no column).
        headers: each row's headers (None where it has none), or None without a
            ``headers`` column.
        msg_ids: each row's message id, or None when the rows have none.
    """

    data: list[bytes]
    subjects: list[str] | None
    headers: list[dict[str, str] | None] | None
    msg_ids: list[str] | None

    def row(
        self, index: int, default_subject: str | None
    ) -> tuple[str, bytes, dict[str, str] | None, str | None]:
        """Row ``index`` as (subject, payload, headers, msg_id)."""
        subject = self.subjects[index] if self.subjects is not None else default_subject
        assert subject is not None  # batch_columns made sure every row has one
        return (
            subject,
            self.data[index],
            self.headers[index] if self.headers is not None else None,
            self.msg_ids[index] if self.msg_ids is not None else None,
        )


def batch_columns(
    batch: pa.RecordBatch, default_subject: str | None, id_columns: Sequence[str], first_row: int
) -> RowColumns:
    """The rows of ``batch`` as lists, every row checked.

    Args:
        batch: the Arrow batch Spark handed the task.
        default_subject: the ``subject`` option (None if not given).
        id_columns: the ``msgIdColumns`` option (empty if not given).
        first_row: how many rows of the task came before this batch (for messages).

    Raises:
        InvalidArgumentError: a row has no subject, or a null or empty message id; the
            message names the row (counted from 0 within the task).
    """
    names = batch.schema.names
    return RowColumns(
        data=_payloads(batch.column("data")),
        subjects=(
            _subjects(batch.column("subject"), default_subject, first_row)
            if "subject" in names
            else None
        ),
        headers=(
            [dict(pairs) if pairs else None for pairs in batch.column("headers").to_pylist()]
            if "headers" in names
            else None
        ),
        msg_ids=_msg_ids(batch, id_columns, first_row),
    )


def _payloads(column: pa.Array) -> list[bytes]:
    # A string column becomes binary without copying (the same buffers), so to_pylist
    # makes the bytes the publish takes instead of str to encode row by row.
    if pa.types.is_string(column.type):
        column = column.cast(pa.binary())
    elif pa.types.is_large_string(column.type):
        column = column.cast(pa.large_binary())
    if column.null_count:
        column = pc.fill_null(column, pa.scalar(b"", column.type))
    values: list[bytes] = column.to_pylist()
    return values


def _subjects(column: pa.Array, default_subject: str | None, first_row: int) -> list[str]:
    if column.null_count:
        if default_subject is None:
            row = first_row + pc.index(column.is_null(), True).as_py()
            raise InvalidArgumentError(
                f"{SINK}: row {row} of this task has a null 'subject' and no 'subject' "
                "option is set"
            )
        column = pc.fill_null(column, pa.scalar(default_subject, column.type))
    values: list[str] = column.to_pylist()
    return values


def _msg_ids(batch: pa.RecordBatch, id_columns: Sequence[str], first_row: int) -> list[str] | None:
    """Each row's message id: the ``msg_id`` column, or the ``msgIdColumns`` joined."""
    if id_columns:
        parts = [batch.column(name) for name in id_columns]
        texts = [
            part
            if pa.types.is_string(part.type) or pa.types.is_large_string(part.type)
            else part.cast(pa.string())
            for part in parts
        ]
        ids = pc.binary_join_element_wise(*texts, ":")  # null where any part is null
        if ids.null_count:
            index = pc.index(ids.is_null(), True).as_py()
            nulls = [
                name
                for name, part in zip(id_columns, parts, strict=True)
                if not part[index].is_valid
            ]
            raise InvalidArgumentError(
                f"{SINK}: row {first_row + index} of this task has a null in column(s) "
                f"{nulls} of option 'msgIdColumns', so it has no message id"
            )
    elif "msg_id" in batch.schema.names:
        ids = batch.column("msg_id")
    else:
        return None
    missing = pc.fill_null(pc.equal(pc.binary_length(ids), 0), True)
    if pc.any(missing).as_py():
        row = first_row + pc.index(missing, True).as_py()
        raise InvalidArgumentError(f"{SINK}: row {row} of this task has a null or empty message id")
    values: list[str] = ids.to_pylist()
    return values


__all__ = ["SINK", "RowColumns", "batch_columns"]
