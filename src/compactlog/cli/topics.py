"""``topics`` and ``configs``: kafka-topics and kafka-configs over a data directory, or through a running
broker with ``--bootstrap-server`` (``wire.py``; same calls, same output)."""

from __future__ import annotations

import os

import click

from ..errors import InvalidPartitionsError, InvalidReplicationFactorError, UnknownTopicOrPartitionError
from ..topics import check_deletable, is_internal, replication_refusal
from .common import INT_MAX, Number, OneOf, data_dir_option, kafka_errors, open_target, parse_key_values, shown
from .users import configure_users


def _config_summary(overrides: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(overrides.items()))


def describe_lines(d, leader: int = 0) -> list[str]:
    """kafka-topics --describe for one TopicDescription: a topic line, then one line per partition. The
    topic id, size and segment count are left out where they are unknown (over the wire)."""
    head = [f"Topic: {d.name}"] + ([f"TopicId: {d.topic_id}"] if d.topic_id else [])
    head += [f"PartitionCount: {len(d.partitions)}", "ReplicationFactor: 1",
             f"Configs: {_config_summary(d.config.overrides)}"]
    lines = ["\t".join(head)]
    for p in d.partitions:
        cols = [f"Topic: {d.name}", f"Partition: {p.partition}", f"Leader: {leader}", f"Replicas: {leader}",
                f"Isr: {leader}", f"LogStartOffset: {p.log_start_offset}", f"LogEndOffset: {p.log_end_offset}"]
        if p.size_bytes is not None:
            cols += [f"Size: {p.size_bytes}", f"Segments: {p.segments}"]
        lines.append("\t" + "\t".join(cols))
    return lines


def reported_lines(d, lines: list[str], with_overrides: bool, under_replicated: bool, unavailable: bool,
                   under_min_isr: bool, at_min_isr: bool) -> list[str]:
    """kafka-topics --describe's report flags over one topic's lines: a partition flag prints only the
    partitions it names (no topic line), --topics-with-overrides only the topic line of a topic with
    overrides. On one node every partition has its leader and its one in-sync replica, so
    under-replicated and unavailable partitions never show, and the ISR (1) is compared with the
    topic's min.insync.replicas."""
    if under_replicated or unavailable or under_min_isr or at_min_isr:
        min_isr = next((int(r.value) for r in d.config.describe() if r.name == "min.insync.replicas"), 1)
        shown_partitions = (under_min_isr and 1 < min_isr) or (at_min_isr and 1 == min_isr)
        return lines[1:] if shown_partitions else []
    if with_overrides:
        return lines[:1] if d.config.overrides else []
    return lines


def check_counts(partitions: int | None, replication_factor: int | None) -> None:
    """kafka-topics' own checks of the two counts, in its words, before anything is asked of the broker
    (librdkafka refuses a negative count with an exception of its own, the API with another message)."""
    if replication_factor is not None and not 1 <= replication_factor <= 32767:
        raise InvalidReplicationFactorError("The replication factor must be between 1 and 32767 inclusive")
    if partitions is not None and partitions < 1:
        raise InvalidPartitionsError("The partitions must be greater than 0")
    if replication_factor not in (None, 1):  # what the broker answers (one node), as kafka-topics prints it
        raise InvalidReplicationFactorError(replication_refusal(replication_factor))


def topic_configs(items: tuple[str, ...]) -> dict[str, str]:
    """``--config`` as kafka-topics reads it: each one name=value, the value taken whole, commas and all
    (``cleanup.policy=compact,delete``), exactly one '=' in it, a name before it and a value after it."""
    for item in items:
        name, _, value = item.partition("=")
        if item.count("=") != 1 or not name.strip() or not value.strip():
            raise click.BadParameter(f"{shown(item)}: Invalid topic config: all configs to be added must be in "
                                     'the format "key=val".', param_hint="'--config'")
    return parse_key_values(items, "--config")


def matching_topics(names: list[str], pattern: str | None, exclude_internal: bool) -> list[str]:
    """The topics kafka-topics acts on outside --create: ``--topic`` is a regular expression the whole
    name must match, read as Kafka's include list reads it (commas are alternatives, spaces and quotes
    around it dropped), so ``'prices.*'`` describes every prices topic and ``--list --topic T`` lists only
    T; ``--exclude-internal`` leaves out the internal topics."""
    import re

    if pattern is None:
        chosen = list(names)
    else:
        text = pattern.strip().replace(",", "|").replace(" ", "").strip("\"'")
        try:
            regex = re.compile(text)
        except re.error as exc:
            raise click.BadParameter(f"{shown(pattern)} is not a valid regular expression: {exc}",
                                     param_hint="'--topic'") from None
        chosen = [name for name in names if regex.fullmatch(name)]
    return [name for name in chosen if not (exclude_internal and is_internal(name))]


def one_action(actions: dict[str, bool]) -> str:
    """The one action flag given, as kafka-topics and kafka-configs insist."""
    given = [name for name, on in actions.items() if on]
    if len(given) != 1:
        names = [f"--{name}" for name in actions]
        raise click.UsageError(f"Command must include exactly one action: {', '.join(names[:-1])} or {names[-1]}"
                               + (f" (got {' and '.join('--' + g for g in given)})" if given else ""))
    return given[0]


@click.command("topics")
@data_dir_option(may_create="--create", wire=True)
@click.option("--create", is_flag=True, help="Create a topic.")
@click.option("--delete", is_flag=True, help="Delete a topic and all its data.")
@click.option("--list", "list_", is_flag=True, help="List topic names.")
@click.option("--describe", is_flag=True, help="Describe one topic or all.")
@click.option("--alter", is_flag=True, help="Add partitions to a topic: --alter --topic T --partitions N (only growth).")
@click.option("--topic", help="The topic name.")
@click.option("--partitions", type=Number(-INT_MAX - 1, INT_MAX),
              help="Partition count for --create (default num.partitions), or the new, larger count for --alter.")
@click.option("--replication-factor", type=Number(-INT_MAX - 1, INT_MAX), help="Accepted for compatibility; must be 1 (one node).")
@click.option("--config", "configs", multiple=True, help="Topic config override k=v; repeatable.")
@click.option("--if-not-exists", is_flag=True, help="With --create, do nothing if the topic exists.")
@click.option("--if-exists", is_flag=True, help="With --alter, --delete or --describe, do nothing if the topic is missing.")
@click.option("--exclude-internal", is_flag=True, help="With --list or --describe, leave out internal topics.")
@click.option("--topics-with-overrides", is_flag=True, help="With --describe: only topics with config overrides.")
@click.option("--under-replicated-partitions", "under_replicated", is_flag=True,
              help="With --describe: partitions with fewer in-sync replicas than replicas (none on one node).")
@click.option("--unavailable-partitions", "unavailable", is_flag=True,
              help="With --describe: partitions without a leader (none on one node).")
@click.option("--under-min-isr-partitions", "under_min_isr", is_flag=True,
              help="With --describe: partitions with fewer in-sync replicas than min.insync.replicas.")
@click.option("--at-min-isr-partitions", "at_min_isr", is_flag=True,
              help="With --describe: partitions with exactly min.insync.replicas in-sync replicas.")
@kafka_errors
def topics(data_dir, server_properties, bootstrap_server, create, delete, list_, describe, alter, topic, partitions,
           replication_factor, configs, if_not_exists, if_exists, exclude_internal, topics_with_overrides,
           under_replicated, unavailable, under_min_isr, at_min_isr):
    """Create, delete, list, describe and grow topics (kafka-topics), in a data directory or through a
    running broker.

    Example: compactlog topics --data-dir data --create --topic prices --config cleanup.policy=compact

    Example: compactlog topics --bootstrap-server 127.0.0.1:9092 --alter --topic prices --partitions 6

    Outside --create, --topic is a regular expression the whole name must match, as in kafka-topics:
    escape a dot ('prices\\.eu') to mean only that topic.
    """
    action = one_action({"create": create, "delete": delete, "list": list_, "describe": describe, "alter": alter})
    if action in ("delete", "alter") and not topic or action == "create" and topic is None:
        raise click.UsageError(f"--{action} needs --topic")
    if action == "alter" and partitions is None:
        raise click.UsageError("--alter needs --partitions (the new, larger partition count)")
    if action != "create":
        given = {"--partitions": partitions is not None and action != "alter",
                 "--replication-factor": replication_factor is not None, "--config": bool(configs),
                 "--if-not-exists": if_not_exists}
        if action == "list" and if_exists:
            raise click.UsageError("--if-exists only goes with --alter, --delete or --describe")
        for flag, on in given.items():
            if on:
                raise click.UsageError(f"{flag} only goes with --create, not --{action}")
        if data_dir is not None and not os.path.isdir(data_dir):
            raise click.BadParameter(f"Directory {data_dir!r} does not exist.", param_hint="'--data-dir'")
    elif if_exists:
        raise click.UsageError("--if-exists only goes with --alter, --delete or --describe")
    if exclude_internal and action not in ("list", "describe"):
        raise click.UsageError("--exclude-internal only goes with --list or --describe")
    reports = {"--under-replicated-partitions": under_replicated, "--unavailable-partitions": unavailable,
               "--under-min-isr-partitions": under_min_isr, "--at-min-isr-partitions": at_min_isr,
               "--topics-with-overrides": topics_with_overrides}
    for flag, on in reports.items():
        if on and action != "describe":
            raise click.UsageError(f"{flag} only goes with --describe")
    check_counts(partitions, replication_factor)
    overrides = topic_configs(configs)
    with open_target(data_dir, server_properties, bootstrap_server) as cl:
        names = [] if action == "create" else matching_topics(cl.list_topics(), topic, exclude_internal)
        if action in ("delete", "alter", "describe") and topic and not names:
            if if_exists:
                return
            raise UnknownTopicOrPartitionError(f"Topic {shown(topic)} does not exist as expected")
        if action == "create":
            if if_not_exists and topic in cl.list_topics():
                return
            cl.create_topic(topic, partitions, overrides)
            click.echo(f"Created topic {topic}.")
        elif action == "delete":
            for name in names:  # before any is deleted: '.*' does not delete half and then stop
                check_deletable(name)
            for name in names:
                cl.delete_topic(name)
                click.echo(f"Deleted topic {name}.")
        elif action == "alter":
            for name in names:
                cl.create_partitions(name, partitions)
        elif action == "list":
            for name in names:
                click.echo(name)
        else:
            for name in names:
                d = cl.describe_topic(name)
                for line in reported_lines(d, describe_lines(d, getattr(cl, "node_id", 0)), topics_with_overrides,
                                           under_replicated, unavailable, under_min_isr, at_min_isr):
                    click.echo(line)


@click.command("configs")
@data_dir_option(wire=True)
@click.option("--entity-type", type=OneOf(["topics", "users"]), default="topics",
              help="topics, or users for their SCRAM credentials.")
@click.option("--topic", "--entity-name", "topic", help="The topic (the user with --entity-type users).")
@click.option("--alter", is_flag=True, help="Change configs.")
@click.option("--describe", is_flag=True, help="Show configs.")
@click.option("--add-config", "add", multiple=True, help="k=v[,k=v...] to set.")
@click.option("--delete-config", "delete", multiple=True, help="k[,k...] to remove (back to the default).")
@click.option("--all", "show_all", is_flag=True, help="With --describe, every config, not only overrides.")
@kafka_errors
def configs(data_dir, server_properties, bootstrap_server, entity_type, topic, alter, describe, add, delete, show_all):
    """Alter and describe topic configs (kafka-configs), in a data directory or through a running broker.

    Example: compactlog configs --data-dir data --alter --topic prices --add-config compression.type=zstd

    Example: compactlog configs --bootstrap-server 127.0.0.1:9092 --entity-type topics --entity-name prices --describe
    """
    action = one_action({"alter": alter, "describe": describe})
    if entity_type == "users":  # SCRAM credentials: users.py (no data directory lock needed)
        return configure_users(data_dir, topic, action, add, delete, bootstrap_server)
    if not topic and (action == "alter" or topic is not None):  # --describe alone: every topic, as kafka-configs
        raise click.UsageError("Missing option '--topic' / '--entity-name'.")
    if action == "alter":
        if not add and not delete:
            raise click.UsageError("--alter needs --add-config or --delete-config")
        if show_all:
            raise click.UsageError("--all only goes with --describe")
        changes = parse_key_values(add, "--add-config", commas=True)
        names = [n.strip() for item in delete for n in item.split(",") if n.strip()]
        if not changes and not names:  # --add-config '' and the like: nothing to change
            raise click.UsageError("--alter needs a name=value in --add-config or a name in --delete-config")
    elif add or delete:
        raise click.UsageError("--add-config and --delete-config only go with --alter")
    with open_target(data_dir, server_properties, bootstrap_server) as cl:
        if action == "alter":
            cl.alter_topic_config(topic, changes, names)
            click.echo(f"Completed updating config for topic {topic}.")
            return
        for name in [topic] if topic else cl.list_topics():
            cfg = cl.describe_topic(name).config
            click.echo(f"{'All' if show_all else 'Dynamic'} configs for topic {name} are:")
            for row in cfg.describe():
                if show_all or row.source == "DYNAMIC_TOPIC_CONFIG":
                    click.echo(f"  {row.name}={row.value} sensitive=false synonyms={{{row.source}:{row.name}={row.value}}}")
