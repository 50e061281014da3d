"""Appending HTTP requests to webhook sources (Materialize's
`AppendWebhookValidator`, `AppendWebhookResponse`, `AppendWebhookError`,
`WebhookAppenderCache`; the HTTP half is `server/webhook.py`).

One request: find the source (resolved once per catalog version), run its
CHECK in-process on (headers, body, secrets, receipt time), turn the body
into rows (typed bodies checked with pandera), skip the request if its
`Idempotency-Key` was appended already, then group-commit the rows: requests
arriving together share one append at one timestamp, and each returns only
once that append is durable. A webhook source is written by nothing else,
so group commit also advances its upper with the tables'.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import pandas as pd
import pyarrow as pa
from pandera.errors import SchemaError, SchemaErrorReason

from coordinator_lib.adapter.errors import AdapterError, DependencyDropped
from coordinator_lib.adapter.idempotency import IdempotencyKeys
from coordinator_lib.adapter.secrets import secret_values
from coordinator_lib.adapter.secrets_key import SecretsKeyError
from coordinator_lib.adapter.verify import pandera_schema
from coordinator_lib.compute.local_scalar import eval_scalar, to_numeric
from coordinator_lib.persist import batch as batch_io
from coordinator_lib.repr.errors import InvalidRow
from coordinator_lib.repr.frontier import Frontier
from coordinator_lib.repr.global_id import GlobalId
from coordinator_lib.repr.relation import RelationDesc, ScalarType
from coordinator_lib.repr.text_map import map_value
from coordinator_lib.sql.catalog import CatalogItem, ItemKind, QualifiedName
from coordinator_lib.sql.coercion import parse_text_as
from coordinator_lib.sql.escape_string import invalid_byte_sequence
from coordinator_lib.sql.plan_webhook import (
    CreateWebhookSourcePlan,
    WebhookBodyFormat,
    WebhookHeaders,
    WebhookValidation,
)
from coordinator_lib.storage import CollectionDescription, DataSource, StorageError
from coordinator_lib.storage.errors import IdentifierMissing

if TYPE_CHECKING:
    from coordinator_lib.adapter.coordinator import Coordinator

S = ScalarType
Row = tuple[Any, ...]
IDEMPOTENCY_HEADER = "idempotency-key"


class AppendWebhookError(Exception):
    """A request refused, with the HTTP status to answer. Messages never
    carry a secret or the check's details."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message

    @staticmethod
    def not_found(database: str, schema: str, name: str) -> AppendWebhookError:
        return AppendWebhookError(
            404, f"no object was found at the path '{database}.{schema}.{name}'"
        )

    @staticmethod
    def invalid_body(kind: str, detail: str) -> AppendWebhookError:
        return AppendWebhookError(400, f"failed to deserialize body as {kind}: {detail}")

    @staticmethod
    def validation_failed() -> AppendWebhookError:
        return AppendWebhookError(400, "failed to validate the request")

    @staticmethod
    def validation_error() -> AppendWebhookError:
        return AppendWebhookError(400, "error occurred while running validation")

    @staticmethod
    def unavailable() -> AppendWebhookError:
        return AppendWebhookError(503, "service unavailable")


# --- validation ----------------------------------------------------------------------


class AppendWebhookValidator:
    """Evaluates a source's CHECK on one request; any failure to evaluate
    (bad input to decode, a non-UTF-8 body read as text) is an error, not a pass."""

    def __init__(self, validation: WebhookValidation, secrets: Mapping[GlobalId, bytes]) -> None:
        self.validation = validation
        self._secrets: list[Any] = []
        for check_input in validation.inputs:
            if check_input.kind == "secret":
                assert check_input.secret is not None
                value = secrets[check_input.secret]
                self._secrets.append(value if check_input.bytes else _text_or_none(value))
            else:
                self._secrets.append(None)

    def eval(self, body: bytes, headers: Mapping[str, str], received_at: dt.datetime) -> bool:
        row: list[Any] = []
        for check_input, secret in zip(self.validation.inputs, self._secrets, strict=True):
            if check_input.kind == "headers":
                row.append(map_value(headers))
            elif check_input.kind == "body":
                value = body if check_input.bytes else _text_or_none(body)
                if value is None:
                    raise AppendWebhookError.validation_error()
                row.append(value)
            else:
                if secret is None:
                    raise AppendWebhookError.validation_error()
                row.append(secret)
        row.append(received_at)
        try:
            result = eval_scalar(self.validation.expr, tuple(row), self.validation.types)
        except Exception:  # whatever went wrong, the answer is the same and says nothing
            raise AppendWebhookError.validation_error() from None
        return result is True


def _text_or_none(value: bytes) -> str | None:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return None


# --- the resolved source ------------------------------------------------------------


@dataclass(frozen=True)
class AppendWebhookResponse:
    """What appending to one webhook source needs: its id and plan, and the
    validator with its secrets' values at this catalog version."""

    id: GlobalId
    name: QualifiedName
    desc: RelationDesc  # the source's columns, as stored
    plan: CreateWebhookSourcePlan
    validator: AppendWebhookValidator | None

    def rows(self, body: bytes, headers: Mapping[str, str]) -> list[Row]:
        """The rows one request appends (AppendWebhookError 400 if the body
        does not parse or a typed row does not fit)."""
        plan = self.plan
        tail = header_values(plan.headers, headers)
        if plan.typed:
            desc = RelationDesc(
                plan.desc.names[: plan.body_columns], plan.desc.types[: plan.body_columns]
            )
            bodies = typed_rows(desc, body, plan.body_format)
            return [(*values, *tail) for values in bodies]
        return [(value, *tail) for value in body_values(body, plan.body_format)]


def header_values(spec: WebhookHeaders, headers: Mapping[str, str]) -> tuple[Any, ...]:
    """The header columns' values, in column order."""
    values: list[tuple[int, Any]] = []
    if spec.column is not None:
        kept = {
            name: value
            for name, value in headers.items()
            if (not spec.allow or name in spec.allow) and name not in spec.block
        }
        values.append((spec.column, map_value(kept)))
    for index, header, as_bytes in spec.mapped:
        value = headers.get(header)
        if value is not None and as_bytes:
            value = value.encode()
        values.append((index, value))
    return tuple(value for _, value in sorted(values, key=lambda pair: pair[0]))


# --- bodies ---------------------------------------------------------------------------

_WHITESPACE = re.compile(r"[ \t\n\r]*")


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"number out of range: {text}")
    return number


def _no_constant(text: str) -> Any:
    raise ValueError(f"invalid JSON value: {text}")


_DECODER = json.JSONDecoder(parse_constant=_no_constant)  # overflow to inf: see jsonb_text
_TYPED_DECODER = json.JSONDecoder(parse_float=decimal.Decimal, parse_constant=_no_constant)


def json_values(body: bytes, array: bool, decoder: json.JSONDecoder = _DECODER) -> list[Any]:
    """The JSON values of a body: one, or several separated by whitespace
    (NDJSON); with `array`, a top-level array stands for its elements."""
    try:
        text = body.decode("utf-8")
        values: list[Any] = []
        position = _WHITESPACE.match(text, 0).end()  # type: ignore[union-attr]
        while position < len(text):
            value, position = decoder.raw_decode(text, position)
            if array and isinstance(value, list):
                values.extend(value)
            else:
                values.append(value)
            position = _WHITESPACE.match(text, position).end()  # type: ignore[union-attr]
        return values
    except (ValueError, RecursionError) as error:  # JSONDecodeError and UnicodeDecodeError too
        raise AppendWebhookError.invalid_body("jsonb", _short(error)) from None


def body_values(body: bytes, body_format: WebhookBodyFormat) -> list[Any]:
    """The `body` column's value for each row of an untyped source."""
    if body_format is WebhookBodyFormat.BYTES:
        return [body]
    if body_format is WebhookBodyFormat.TEXT:
        try:
            return [_utf8(body.decode("utf-8"))]
        except ValueError as error:  # UnicodeDecodeError too
            raise AppendWebhookError.invalid_body("text", _short(error)) from None
    values = json_values(body, body_format is WebhookBodyFormat.JSON_ARRAY, _ORDERED_DECODER)
    try:
        return [_ordered_jsonb_text(value) for value in values]
    except (ValueError, RecursionError) as error:
        raise AppendWebhookError.invalid_body("jsonb", _short(error)) from None


def _jsonb_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """The decoder's object hook: an object with its keys in jsonb's order
    as it is parsed, so the stored text needs no second walk (`_ordered`).
    A key given twice keeps its last value, as a dict (and jsonb) does."""
    order = _ascii_key_order if all(key.isascii() for key, _ in pairs) else _key_order
    pairs.sort(key=lambda pair: order(pair[0]))
    return dict(pairs)


_ORDERED_DECODER = json.JSONDecoder(object_pairs_hook=_jsonb_object, parse_constant=_no_constant)


def _ordered_jsonb_text(value: Any) -> str:
    """`jsonb_text` of a value `_ORDERED_DECODER` parsed (its objects' keys
    already in jsonb's order). What `_ordered` refuses shows in the encoded
    text: a NUL as `\\u0000`, a number out of range as `Infinity`; a text
    with either (or a string that merely holds those characters) takes
    `jsonb_text`, which decides."""
    text = _JSONB_ENCODER.encode(value)
    if "\\u0000" in text or "Infinity" in text:
        return jsonb_text(value)
    return _utf8(text)


def _key_order(key: str) -> tuple[int, bytes]:
    encoded = key.encode("utf-8", "surrogatepass")
    return len(encoded), encoded


def _ascii_key_order(key: str) -> tuple[int, str]:
    """`_key_order` for ASCII keys (their UTF-8 is their characters), without encoding them."""
    return len(key), key


def _ordered(value: Any) -> Any:
    """`value` with object keys in jsonb's order; refuses non-finite numbers
    and NUL in strings (PostgreSQL's jsonb cannot convert \\u0000 to text)."""
    if isinstance(value, str):
        if "\x00" in value:
            raise ValueError(
                "unsupported Unicode escape sequence: \\u0000 cannot be converted to text"
            )
        return value
    if isinstance(value, dict):
        order = _ascii_key_order if all(key.isascii() for key in value) else _key_order
        return {_ordered(key): _ordered(value[key]) for key in sorted(value, key=order)}
    if isinstance(value, list):
        return [_ordered(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("number out of range")
    return value


# What json.dumps(value, ensure_ascii=False, separators=...) builds on every call.
_JSONB_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": "))


def jsonb_text(value: Any) -> str:
    """A parsed JSON value as stored jsonb text: `canonical_jsonb`'s output,
    with the encoding done by json's C encoder (several times faster)."""
    return _utf8(_JSONB_ENCODER.encode(_ordered(value)))


def _utf8(text: str) -> str:
    """`text`, if it can be stored: JSON allows lone surrogates, UTF-8 does
    not; PostgreSQL's text holds no NUL (22021)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("invalid unicode escape in a string") from None
    if "\x00" in text:
        raise ValueError(invalid_byte_sequence(b"\x00"))
    return text


def _short(error: BaseException) -> str:
    return str(error)[:200] if not isinstance(error, RecursionError) else "nested too deeply"


# --- typed bodies ---------------------------------------------------------------------

_INTEGERS = (S.SMALLINT, S.INTEGER, S.BIGINT)
_PARSED_FROM_TEXT = (S.DATE, S.TIMESTAMP, S.TIMESTAMPTZ, S.BYTEA)
_NUMERIC_LIMIT = decimal.Decimal(10) ** 28  # decimal(38, 10)


def typed_rows(desc: RelationDesc, body: bytes, body_format: WebhookBodyFormat) -> list[Row]:
    """Each JSON object of the body as a row of `desc` (fields by column
    name, missing ones NULL, others ignored), checked with pandera."""
    values = json_values(body, body_format is WebhookBodyFormat.JSON_ARRAY, _TYPED_DECODER)
    rows: list[Row] = []
    for position, value in enumerate(values):
        if not isinstance(value, dict):
            raise AppendWebhookError.invalid_body(
                "a typed row", f"event {position} is not a JSON object"
            )
        rows.append(
            tuple(
                _field(value.get(name), column.scalar_type)
                for name, column in zip(desc.names, desc.types, strict=True)
            )
        )
    check_typed_rows(desc, rows)
    return rows


class _Unfit:
    """A JSON value that does not fit its column (pandera refuses it)."""

    def __init__(self, value: Any) -> None:
        self.value = value


def _field(value: Any, scalar: ScalarType) -> Any:
    """A JSON value as `scalar`'s Python value, or _Unfit."""
    if value is None:
        return None
    try:
        return _convert(value, scalar)
    except Exception:  # any failure to convert means the same: it does not fit
        return _Unfit(value)


def _convert(value: Any, scalar: ScalarType) -> Any:
    if scalar is S.JSONB:
        return jsonb_text(_plain(value))
    number = isinstance(value, int | decimal.Decimal) and not isinstance(value, bool)
    if scalar is S.BOOLEAN and isinstance(value, bool):
        return value
    if scalar in _INTEGERS and number and isinstance(value, int):
        return value  # pandera checks the range
    if scalar in (S.REAL, S.DOUBLE) and number:
        return _finite(str(value))
    if scalar is S.NUMERIC and number:
        rounded = to_numeric(decimal.Decimal(value))
        if abs(rounded) < _NUMERIC_LIMIT:
            return rounded
    if scalar is S.TEXT and isinstance(value, str):
        return _utf8(value)
    if scalar in _PARSED_FROM_TEXT and isinstance(value, str):
        return parse_text_as(value, scalar)
    raise ValueError(f"{value!r} is not a {scalar.value}")


def _plain(value: Any) -> Any:
    """Decimals (from the typed decoder) back to JSON numbers for jsonb."""
    if isinstance(value, decimal.Decimal):
        return _finite(str(value))
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def check_typed_rows(desc: RelationDesc, rows: list[Row]) -> None:
    """pandera's verdict on typed rows: AppendWebhookError 400 naming the
    first event and column that do not fit."""
    if not rows:
        return
    frame = pd.DataFrame(list(rows), columns=list(desc.names), dtype=object)
    try:
        pandera_schema(desc).validate(frame)
    except SchemaError as error:
        column = str(error.schema.name) if error.schema is not None else "?"
        cases = error.failure_cases
        row = int(cases["index"].iloc[0]) if cases is not None and len(cases) else None
        where = f"event {row}, " if row is not None else ""
        if error.reason_code is SchemaErrorReason.SERIES_CONTAINS_NULLS:
            message = f'{where}column "{column}": null value violates not-null constraint'
        else:
            index = desc.names.index(column) if column in desc.names else -1
            expected = desc.types[index].scalar_type.value if index >= 0 else "?"
            shown = _shown(rows[row][index]) if row is not None and index >= 0 else "value"
            message = f'{where}column "{column}": {shown} is not a {expected}'
        raise AppendWebhookError(
            400, f"body does not match the source's schema: {message}"
        ) from None


def _shown(value: Any) -> str:
    if isinstance(value, _Unfit):
        value = value.value
    try:
        text = json.dumps(_plain(value), ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# --- catalog lookups ----------------------------------------------------------------------


class WebhookAppenderCache:
    """Resolved webhook sources by (database, schema, name), valid for one
    catalog version (the catalog's index object: DDL makes a new one)."""

    def __init__(self, coord: Coordinator) -> None:
        self.coord = coord
        self._lock = threading.Lock()
        self._version: object = None
        self._entries: dict[tuple[str, str, str], AppendWebhookResponse] = {}

    def get(self, database: str, schema: str, name: str) -> AppendWebhookResponse:
        key = (database, schema, name)
        for attempt in range(2):
            index = self.coord.catalog.index
            with self._lock:
                if index is not self._version:
                    self._version, self._entries = index, {}
                hit = self._entries.get(key)
            if hit is not None:
                return hit
            response = self._resolve(index, key)
            if response is not None:
                with self._lock:
                    if self._version is index:
                        self._entries[key] = response
                return response
            if attempt == 0:
                self.coord.refresh_catalog()  # created by another process just now?
        raise AppendWebhookError.not_found(database, schema, name)

    def _resolve(self, index: Any, key: tuple[str, str, str]) -> AppendWebhookResponse | None:
        item: CatalogItem | None = index.lookup(QualifiedName(*key))
        if item is None or item.kind is not ItemKind.SOURCE:
            return None
        plan = index.plans.get(item.id)
        if not isinstance(plan, CreateWebhookSourcePlan) or not self.coord.is_installed(item.id):
            return None
        validator = None
        if plan.validation is not None:
            ids = {i.secret for i in plan.validation.inputs if i.secret is not None}
            try:
                values = secret_values(self.coord, ids)
            except SecretsKeyError:  # wrong or missing key: no check, so no append
                raise AppendWebhookError(
                    503,
                    f"webhook source '{item.name}' cannot read its secret: check the secrets key",
                ) from None
            except AdapterError:
                return None
            validator = AppendWebhookValidator(plan.validation, values)
        return AppendWebhookResponse(item.id, item.name, item.desc, plan, validator)


# --- appending ----------------------------------------------------------------------------


class AppendResult(NamedTuple):
    """`rows` appended at `timestamp` (None if none); `duplicate`: the
    Idempotency-Key was appended before, nothing was written now. A named
    tuple: one is made per request, and a frozen dataclass costs several
    times as much to build."""

    rows: int
    timestamp: int | None = None
    duplicate: bool = False


class WebhookRequest(NamedTuple):
    """One POST: the source's path names, the body, the headers (names lower
    case) and when it was received (what now() means in the CHECK). A named
    tuple, as `AppendResult`: the event loop builds one per request."""

    database: str
    schema: str
    name: str
    body: bytes
    headers: Mapping[str, str]
    received_at: dt.datetime


Outcome = AppendResult | Exception


@dataclass(slots=True)
class _Staged:
    """A request that passed its checks, waiting for the batch's commit."""

    index: int
    source: AppendWebhookResponse
    rows: list[Row]
    key: str | None


class WebhookAppender:
    """The webhook endpoint's adapter half (one per coordinator process)."""

    def __init__(self, coord: Coordinator) -> None:
        self.coord = coord
        self.cache = WebhookAppenderCache(coord)
        self.keys = IdempotencyKeys(coord.config.webhook_idempotency_window_ms)
        self._seeded: set[GlobalId] = set()
        self._seed_lock = threading.Lock()

    def append(
        self,
        database: str,
        schema: str,
        name: str,
        body: bytes,
        headers: Mapping[str, str],
        received_at: dt.datetime,
    ) -> AppendResult:
        """Validate, build and durably append one request's rows (raises
        what `append_all` reports for it)."""
        request = WebhookRequest(database, schema, name, body, headers, received_at)
        [outcome] = self.append_all([request])
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def append_all(self, requests: Sequence[WebhookRequest]) -> list[Outcome]:
        """Each request's outcome, in order: its AppendResult, or the error
        that refused it (AppendWebhookError with its HTTP status, or any
        other exception: a bug). The rows of every request that passes its
        checks go into one group commit (one timestamp, one encoded batch
        per source), so a burst of requests costs one commit, not one each.
        A request whose Idempotency-Key an earlier request of the same call
        holds gets that one's outcome (a duplicate if it was appended)."""
        outcomes: list[Outcome | None] = [None] * len(requests)
        staged: list[_Staged] = []
        holder: dict[tuple[GlobalId, str], int] = {}  # a key claimed here -> its request
        followers: list[tuple[int, int]] = []  # (request, request holding its key)
        for index, request in enumerate(requests):
            try:
                found = self._stage(index, request)
                if isinstance(found, AppendResult):
                    outcomes[index] = found
                    continue
                if found.key is not None:
                    first = holder.get((found.source.id, found.key))
                    if first is not None:
                        followers.append((index, first))
                        continue
                    if not self.keys.claim(found.source.id, found.key):
                        outcomes[index] = AppendResult(0, duplicate=True)
                        continue
                    holder[(found.source.id, found.key)] = index
                staged.append(found)
            except Exception as error:  # this request's refusal (or bug), not the others'
                outcomes[index] = error
        try:
            self._commit(staged, outcomes)
        finally:
            for item in staged:
                if item.key is not None:
                    appended = isinstance(outcomes[item.index], AppendResult)
                    self.keys.release(item.source.id, item.key, appended)
        for index, first in followers:
            outcome = outcomes[first]
            outcomes[index] = (
                AppendResult(0, duplicate=True) if isinstance(outcome, AppendResult) else outcome
            )
        assert all(outcome is not None for outcome in outcomes)
        return outcomes  # type: ignore[return-value]

    def _stage(self, index: int, request: WebhookRequest) -> _Staged | AppendResult:
        """The request's rows after its CHECK, or AppendResult(0) for a body
        with no rows (nothing to commit)."""
        if self.coord.closing:
            raise AppendWebhookError.unavailable()
        source = self.cache.get(request.database, request.schema, request.name)
        validator = source.validator
        if validator is not None and not validator.eval(
            request.body, request.headers, request.received_at
        ):
            raise AppendWebhookError.validation_failed()
        rows = source.rows(request.body, request.headers)
        if not rows:
            return AppendResult(0)
        key = request.headers.get(IDEMPOTENCY_HEADER)
        if key is not None:
            self._seed(source)
        return _Staged(index, source, rows, key)

    def _commit(self, staged: list[_Staged], outcomes: list[Outcome | None]) -> None:
        """Commit the staged requests' rows together and record each one's
        outcome. If that fails and they span several sources, each source
        is committed on its own, so a source dropped just now fails only its
        own requests."""
        if not staged:
            return
        by_source: dict[GlobalId, list[_Staged]] = {}
        for item in staged:
            by_source.setdefault(item.source.id, []).append(item)
        groups = [staged] if len(by_source) == 1 else [*by_source.values()]
        if len(groups) > 1:
            try:
                self._commit_group(staged, outcomes)
                return
            except Exception:  # retried per source below, which reports it
                pass
        for group in groups:
            try:
                self._commit_group(group, outcomes)
            except Exception as error:
                refusal = self._refusal(group[0].source, error)
                for item in group:
                    outcomes[item.index] = refusal

    def _commit_group(self, group: list[_Staged], outcomes: list[Outcome | None]) -> None:
        encoded = self._encode(group, outcomes)
        if not encoded:
            return
        timestamp = self.coord.commit_writes({id: [] for id in encoded}, encoded)
        for item in group:
            if outcomes[item.index] is None:
                outcomes[item.index] = AppendResult(len(item.rows), timestamp)

    def _encode(
        self, group: list[_Staged], outcomes: list[Outcome | None]
    ) -> dict[GlobalId, pa.Table]:
        """Each source's rows of `group` as one batch table (what group
        commit appends), built once per batch rather than per request. The
        rows were built to fit the source's columns (typed bodies checked by
        pandera), so they are not checked again row by row; a value Arrow
        cannot hold fails only its own request (400)."""
        descs = {item.source.id: item.source.desc for item in group}
        try:
            return {id: batch_io.inserts_to_table(rows, descs[id]) for id, rows in _rows(group)}
        except InvalidRow:
            pass
        kept: list[_Staged] = []
        for item in group:  # find the requests that cannot be stored
            try:
                batch_io.inserts_to_table(item.rows, item.source.desc)
                kept.append(item)
            except InvalidRow as error:
                message = f"body does not match the source's schema: {_short(error)}"
                outcomes[item.index] = AppendWebhookError(400, message)
        return {id: batch_io.inserts_to_table(rows, descs[id]) for id, rows in _rows(kept)}

    def _refusal(self, source: AppendWebhookResponse, error: Exception) -> Exception:
        """What a failed commit answers: 404 for a source dropped just now,
        503 while shutting down, else the error itself."""
        name = source.name
        if isinstance(error, StorageError) and self.coord.closing:
            return AppendWebhookError.unavailable()
        if isinstance(error, DependencyDropped | IdentifierMissing):
            return AppendWebhookError.not_found(name.database, name.schema, name.item)
        return error

    def _seed(self, source: AppendWebhookResponse) -> None:
        """Once per source and process: remember the keys its rows hold."""
        if source.id in self._seeded:
            return
        with self._seed_lock:
            if source.id not in self._seeded:
                self.keys.seed(source.id, stored_keys(self.coord, source))
                self._seeded.add(source.id)


def _rows(group: list[_Staged]) -> list[tuple[GlobalId, list[Row]]]:
    """The rows of `group`'s requests, by source."""
    rows: dict[GlobalId, list[Row]] = {}
    for item in group:
        rows.setdefault(item.source.id, []).extend(item.rows)
    return list(rows.items())


def idempotency_column(plan: CreateWebhookSourcePlan) -> tuple[int, str] | None:
    """The column that keeps a request's Idempotency-Key, and how: "text",
    "bytes" (INCLUDE HEADER) or "headers" (the INCLUDE HEADERS object)."""
    for index, header, as_bytes in plan.headers.mapped:
        if header == IDEMPOTENCY_HEADER:
            return index, "bytes" if as_bytes else "text"
    spec = plan.headers
    kept = not spec.allow or IDEMPOTENCY_HEADER in spec.allow
    if spec.column is not None and kept and IDEMPOTENCY_HEADER not in spec.block:
        return spec.column, "headers"
    return None


def stored_keys(coord: Coordinator, source: AppendWebhookResponse) -> list[str]:
    """The Idempotency-Keys of the source's rows at its latest readable time
    (none if no column keeps them)."""
    found = idempotency_column(source.plan)
    if found is None:
        return []
    column, how = found
    hold, upper = coord.storage.acquire_latest_read_hold(source.id)
    with hold:
        if upper.time is None or upper.time <= 0:
            return []
        rows = coord.storage.snapshot(source.id, upper.time - 1)
    keys = []
    for row, count in rows:
        value = row[column]
        if count <= 0 or value is None:
            continue
        if how == "bytes":
            value = value.decode("utf-8", errors="replace")
        elif how == "headers":
            value = json.loads(value).get(IDEMPOTENCY_HEADER)
        if isinstance(value, str):
            keys.append(value)
    return keys


def install_webhook_source(coord: Coordinator, item: CatalogItem) -> None:
    """A webhook source's collection, written only by group commit. Like a
    table it starts at a fresh write time: readable at once, and never at
    times before it existed."""
    created = coord.oracle.write_ts()
    description = CollectionDescription(item.desc, DataSource.webhook(), Frontier.at(created))
    coord.storage.create_collections([(item.id, description)])
    _, upper = coord.storage.collection_frontiers(item.id)
    if upper.time is not None and upper.time <= created:
        coord.storage.append([(item.id, [], created + 1)])
    coord.oracle.apply_write(created)


__all__ = [
    "IDEMPOTENCY_HEADER",
    "AppendResult",
    "AppendWebhookError",
    "AppendWebhookResponse",
    "AppendWebhookValidator",
    "WebhookAppender",
    "WebhookAppenderCache",
    "WebhookRequest",
    "install_webhook_source",
]
