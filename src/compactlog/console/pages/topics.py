"""Topic pages: create a topic, see one (configs, partitions, segments), change its configs, grow it, delete it.

Every change goes through the call its command-line twin makes -- ``CompactLog.create_topic`` as
``topics --create``, ``alter_topic_config`` as ``configs --alter --add-config/--delete-config``,
``create_partitions`` as ``topics --alter --partitions``, and the broker's own DeleteTopics step
(``admin.delete_one``, then the groups' committed offsets) -- so a form checks what those check and a
refusal shows the same Kafka message, with nothing changed. The page reads configs through
``LogConfig.describe`` (what ``configs --describe`` and DescribeConfigs answer) and partitions through
``inventory.partition_facts`` (what the cleaner itself computes).

The segment strip is inline SVG: the content security policy blocks style attributes, while an SVG
rect's ``x`` and ``width`` are presentation attributes, so widths in percent draw without any script.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from aiohttp import web

from ...errors import CompactLogError, UnknownTopicOrPartitionError
from ...server import state_views
from ...server.admin import delete_one
from ...storage.log_config import DescribeRow, LogConfig
from ...storage.topic_config import TOPIC_CONFIGS
from ...topics import is_internal
from .. import inventory
from ..open_transactions import OpenTxnRow, partition_rows
from ..fields import INT_MAX, FieldError, optional_whole_number, shown
from ..handlers import console, page, path_name, require, see_other, topic_url, viewer

routes = web.RouteTableDef()

MAX_STRIP_SEGMENTS = 500  # segments drawn per partition (the newest: the dirty head and the active one)
MIN_SEGMENT_SHARE = 0.006  # the narrowest block, as a share of the strip (a few pixels), so small ones show
MAX_CONFIG_LINES = 200  # name=value lines a create form may carry (there are fewer topic configs than this)


class FormError(ValueError):
    """A form that cannot be read as a request at all (a line without '=', a count that is not a number)."""


# pure rules -----------------------------------------------------------------------------------------

def parse_config_lines(text: str) -> dict[str, str]:
    """``name=value`` lines of the create form, as ``--config`` flags; blank lines and ``#`` comments skipped.

    Values are kept whole (a list such as ``compact,delete`` is one value); names are checked later by
    ``create_topic``, so an unknown one fails with Kafka's message."""
    out: dict[str, str] = {}
    lines = text.splitlines()
    if len(lines) > MAX_CONFIG_LINES:
        raise FormError(f"The form has {len(lines)} config lines; give at most {MAX_CONFIG_LINES}.")
    for n, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, value = line.partition("=")
        if not sep or not name.strip():
            raise FormError(f"Config line {n} is not name=value: {shown(line)}")
        name = name.strip()
        if name in out:
            raise FormError(f"Config {shown(name, '')} is given twice (lines name each config once).")
        out[name] = value.strip()
    return out


def parse_count(text: str, field: str = "partitions") -> int | None:
    """A partition count typed in a form, within Kafka's int32; None for an empty field (the broker's
    default). As ``kafka-topics`` does, a count below 1 is refused with its words (CreateTopics itself
    reads -1 as "the broker's default", which a form that can be left empty does not need)."""
    try:
        count = optional_whole_number(text, field, -INT_MAX - 1, INT_MAX, "number of partitions")
    except FieldError as exc:
        raise FormError(str(exc)) from None
    if count is not None and count < 1:
        raise FormError(f"The partitions must be greater than 0, got {count}.")
    return count


def strip_layout(sizes: list[int], min_share: float = MIN_SEGMENT_SHARE) -> list[tuple[float, float]]:
    """(x, width) in percent of the strip for blocks of these sizes: widths proportional to size, none
    below ``min_share`` (small segments stay visible; the big ones give up the room)."""
    n = len(sizes)
    if n == 0:
        return []
    floor = min(min_share, 1 / n)
    fixed: set[int] = set()
    while True:
        rest = [i for i in range(n) if i not in fixed]
        room = 1 - floor * len(fixed)
        total = sum(sizes[i] for i in rest)
        share = {i: (room * sizes[i] / total if total else room / len(rest)) for i in rest}
        small = {i for i, s in share.items() if s < floor}
        if not small or len(small) == len(rest):
            break
        fixed |= small
    widths = [floor if i in fixed else max(share[i], floor) for i in range(n)]
    scale = 1 / sum(widths)
    out, x = [], 0.0
    for w in widths:
        out.append((round(100 * x, 3), round(100 * w * scale, 3)))
        x += w * scale
    return out


@dataclass(frozen=True)
class ConfigRow:
    """One config as the page shows it: ``configs --describe --all``'s row with the topic's default."""

    name: str
    value: str | None
    default: str | None  # what the topic has without an override: the broker's setting, else Kafka's
    source: str  # DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG or DEFAULT_CONFIG
    doc: str

    @property
    def overridden(self) -> bool:
        return self.source == "DYNAMIC_TOPIC_CONFIG"


def config_rows(cfg: LogConfig) -> list[ConfigRow]:
    def default(row: DescribeRow) -> str | None:
        key = TOPIC_CONFIGS[row.name]
        return key.render(cfg.broker.topic_default(key)[0])

    return [ConfigRow(r.name, r.value, default(r), r.source, r.doc) for r in cfg.describe()]


@dataclass(frozen=True)
class Block:
    """One segment of the strip: where it is drawn and what its title says."""

    segment: inventory.SegmentSummary
    x: float
    width: float

    @property
    def kind(self) -> str:
        return self.segment.kind or "closed"  # a topic without compaction has no clean or dirty


@dataclass(frozen=True)
class PartitionView:
    facts: inventory.PartitionFacts
    blocks: list[Block]
    hidden: int  # older segments not drawn


def partition_view(facts: inventory.PartitionFacts) -> PartitionView:
    segs = facts.segments[-MAX_STRIP_SEGMENTS:]
    layout = strip_layout([s.size for s in segs])
    return PartitionView(facts, [Block(s, x, w) for s, (x, w) in zip(segs, layout)],
                         len(facts.segments) - len(segs))


@dataclass(frozen=True)
class TopicView:
    name: str
    topic_id: str
    config: list[ConfigRow]
    partitions: list[PartitionView]
    kinds: list[str]  # the segment kinds present, for the legend
    open_transactions: list[OpenTxnRow] = field(default_factory=list)  # every partition's, hanging ones flagged

    def value(self, config: str) -> str | None:
        return next((r.value for r in self.config if r.name == config), None)

    @property
    def size(self) -> int:
        return sum(p.facts.size for p in self.partitions)

    @property
    def records(self) -> int:
        return sum(p.facts.records for p in self.partitions)


# reading the disk (on the console's threads) -----------------------------------------------------------

def read_topic(cl, name: str, transactions=None, now_ms: int = 0) -> TopicView:
    """Everything the topic page shows; raises UnknownTopicOrPartitionError for a topic that is gone.
    ``transactions``: the coordinator's ids (``server.state_views``), read on the event loop, against which
    the partitions' open transactions are judged hanging or not."""
    d = cl.describe_topic(name)
    parts = [partition_view(inventory.partition_facts(cl, name, p.partition)) for p in d.partitions]
    present = {b.kind for p in parts for b in p.blocks}
    kinds = [k for k in ("clean", "dirty", "uncleanable", "active", "closed") if k in present]
    txns = [r for p in d.partitions
            for r in partition_rows(cl.partition(name, p.partition), name, p.partition, transactions, now_ms)]
    return TopicView(name, str(d.topic_id), config_rows(d.config), parts, kinds, txns)


# handlers ------------------------------------------------------------------------------------------

async def _form(request: web.Request) -> dict[str, str]:
    return {k: v for k, v in (await request.post()).items() if isinstance(v, str)}


def _new_page(request: web.Request, status: int = 200, error: str | None = None, form: dict | None = None):
    form = form or {}
    return page(request, "topic_new.html", status=status, error=error, name=form.get("name", ""),
                partitions=form.get("partitions", ""), configs=form.get("configs", ""),
                config_names=sorted(TOPIC_CONFIGS))


@routes.get("/topics/new")
async def new_topic_form(request: web.Request) -> web.Response:
    if not viewer(request).can_create_topics():
        require(request, "CREATE")  # refused, with the cluster named as CreateTopics' first choice
    return _new_page(request)


@routes.post("/topics")
async def create_topic(request: web.Request) -> web.Response:
    """CreateTopics' ACL: CREATE on the cluster, or on the topic's name (a literal or prefixed ACL)."""
    form = await _form(request)
    name = form.get("name", "").strip()
    if not viewer(request).can("CREATE"):
        require(request, "CREATE", "TOPIC", name)
    try:
        count = parse_count(form.get("partitions", ""))
        configs = parse_config_lines(form.get("configs", ""))
        await console(request).run(console(request).cl.create_topic, name, count, configs)
    except (CompactLogError, FormError) as exc:
        return _new_page(request, 400, str(exc), form)
    raise see_other(topic_url(name))


async def topic_page(request: web.Request, name: str, status: int = 200, **context) -> web.Response:
    """The topic page (also after a refused form, with its message and what was typed)."""
    require(request, "DESCRIBE", "TOPIC", name)
    c = console(request)
    txns = state_views.transactions(c.broker)  # here, on the event loop that owns the coordinator's state
    try:
        view = await c.run(read_topic, c.cl, name, txns, c.cl.time.milliseconds())
    except UnknownTopicOrPartitionError as exc:
        return page(request, "error.html", status=404, title="Unknown topic", message=str(exc))
    v = viewer(request)
    picked = context.pop("config_name", None) or request.query.get("config", "")
    rows = {r.name: r for r in view.config}
    context.setdefault("config_value", rows[picked].value if picked in rows else "")
    context.setdefault("config_error", None)
    context.setdefault("config_ok", None)
    context.setdefault("partitions_error", None)
    context.setdefault("partitions_ok", False)
    context.setdefault("new_count", "")
    return page(request, "topic.html", status=status, topic=view, url=topic_url(name), config_name=picked,
                topic_url=topic_url,
                internal=is_internal(name),
                can_describe_configs=v.can("DESCRIBE_CONFIGS", "TOPIC", name),
                can_alter_configs=v.can("ALTER_CONFIGS", "TOPIC", name),
                can_alter=v.can("ALTER", "TOPIC", name), can_delete=v.can("DELETE", "TOPIC", name),
                **context)


@routes.get("/topics/{topic}")
async def show_topic(request: web.Request) -> web.Response:
    name = path_name(request, "topic")
    context = {}
    updated = request.query.get("updated")
    if updated in TOPIC_CONFIGS:
        context["config_ok"] = updated
    if request.query.get("grown"):
        context["partitions_ok"] = True
    return await topic_page(request, name, **context)


@routes.post("/topics/{topic}/config")
async def update_config(request: web.Request) -> web.Response:
    """One config set or removed, as ``configs --alter --add-config name=value`` / ``--delete-config name``."""
    name = path_name(request, "topic")
    require(request, "ALTER_CONFIGS", "TOPIC", name)
    form = await _form(request)
    config, value = form.get("name", "").strip(), form.get("value", "")
    c = console(request)
    action = form.get("action", "set")  # the button pressed; a form sent without one sets
    try:
        if action not in ("set", "delete"):  # anything else was set (action=frob changed the config)
            raise FormError(f"The action must be set or delete, got {shown(action)}.")
        if action == "delete":
            await c.run(c.cl.alter_topic_config, name, None, [config])
        else:
            await c.run(c.cl.alter_topic_config, name, {config: value.strip()}, None)
    except (CompactLogError, FormError) as exc:
        return await topic_page(request, name, 400, config_error=str(exc), config_name=config, config_value=value)
    raise see_other(f"{topic_url(name)}?updated={config}&config={config}#update-config")


@routes.post("/topics/{topic}/partitions")
async def add_partitions(request: web.Request) -> web.Response:
    """Grow the topic, as ``topics --alter --partitions N`` (CreatePartitions)."""
    name = path_name(request, "topic")
    require(request, "ALTER", "TOPIC", name)
    form = await _form(request)
    c = console(request)
    try:
        count = parse_count(form.get("count", ""), "count")
        if count is None:
            raise FormError("Give the new number of partitions.")
        await c.run(c.cl.create_partitions, name, count)
    except (CompactLogError, FormError) as exc:
        return await topic_page(request, name, 400, partitions_error=str(exc), new_count=form.get("count", ""))
    raise see_other(f"{topic_url(name)}?grown=1#partitions")


def _delete_page(request: web.Request, name: str, status: int = 200, error: str | None = None, typed: str = ""):
    return page(request, "topic_delete.html", status=status, name=name, url=topic_url(name), error=error,
                typed=typed, internal=is_internal(name))


@routes.get("/topics/{topic}/delete")
async def delete_form(request: web.Request) -> web.Response:
    name = path_name(request, "topic")
    require(request, "DELETE", "TOPIC", name)
    if name not in console(request).cl.list_topics():
        raise UnknownTopicOrPartitionError(f"Topic {shown(name)} does not exist.")
    return _delete_page(request, name)


@routes.post("/topics/{topic}/delete")
async def delete_topic(request: web.Request) -> web.Response:
    """DeleteTopics' own step (internal topics refused), then the groups' committed offsets go and parked
    fetches wake, as the broker does for a Kafka client's request."""
    name = path_name(request, "topic")
    require(request, "DELETE", "TOPIC", name)
    typed = (await _form(request)).get("confirm", "")
    if typed.strip() != name:
        return _delete_page(request, name, 400, f"Type the topic's name, {name}, to delete it.", typed)
    c = console(request)
    try:
        await c.run(delete_one, c.broker, name)
    except CompactLogError as exc:
        return _delete_page(request, name, 400, str(exc), typed)
    await state_views.forget_topic_offsets(c.broker, name)
    c.broker.data_arrived()
    raise see_other("/")
