"""``topics`` and ``configs``: kafka-topics and kafka-configs over a data directory."""

from __future__ import annotations

import click

from .common import data_dir_option, kafka_errors, open_data_dir, parse_key_values


def _config_summary(overrides: dict[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(overrides.items()))


@click.command("topics")
@data_dir_option
@click.option("--create", "action", flag_value="create", help="Create a topic.")
@click.option("--delete", "action", flag_value="delete", help="Delete a topic and all its data.")
@click.option("--list", "action", flag_value="list", help="List topic names.")
@click.option("--describe", "action", flag_value="describe", help="Describe one topic or all.")
@click.option("--topic", help="The topic name.")
@click.option("--partitions", type=int, help="Partition count for --create (default num.partitions).")
@click.option("--replication-factor", type=int, help="Accepted for compatibility; must be 1 (one node).")
@click.option("--config", "configs", multiple=True, help="Topic config override k=v; repeatable.")
@click.option("--if-not-exists", is_flag=True, help="With --create, do nothing if the topic exists.")
@kafka_errors
def topics(data_dir, server_properties, action, topic, partitions, replication_factor, configs, if_not_exists):
    """Create, delete, list and describe topics (kafka-topics).

    Example: compactlog topics --data-dir data --create --topic prices --config cleanup.policy=compact
    """
    if action is None:
        raise click.UsageError("one of --create, --delete, --list, --describe is required")
    if action in ("create", "delete") and not topic:
        raise click.UsageError(f"--{action} needs --topic")
    if replication_factor not in (None, 1, -1):
        raise click.UsageError(f"--replication-factor {replication_factor}: this is a single node, so only 1 is possible")
    with open_data_dir(data_dir, server_properties) as cl:
        if action == "create":
            if if_not_exists and topic in cl.list_topics():
                return
            cl.create_topic(topic, partitions, parse_key_values(configs, "--config"))
            click.echo(f"Created topic {topic}.")
        elif action == "delete":
            cl.delete_topic(topic)
            click.echo(f"Deleted topic {topic}.")
        elif action == "list":
            for name in cl.list_topics():
                click.echo(name)
        else:
            names = [topic] if topic else cl.list_topics()
            for name in names:
                d = cl.describe_topic(name)
                click.echo(
                    f"Topic: {d.name}\tTopicId: {d.topic_id}\tPartitionCount: {len(d.partitions)}\t"
                    f"ReplicationFactor: 1\tConfigs: {_config_summary(d.config.overrides)}"
                )
                for p in d.partitions:
                    click.echo(
                        f"\tTopic: {d.name}\tPartition: {p.partition}\tLeader: 0\tReplicas: 0\tIsr: 0\t"
                        f"LogStartOffset: {p.log_start_offset}\tLogEndOffset: {p.log_end_offset}\t"
                        f"Size: {p.size_bytes}\tSegments: {p.segments}"
                    )


@click.command("configs")
@data_dir_option
@click.option("--entity-type", type=click.Choice(["topics"]), default="topics", help="Only topics are configurable here.")
@click.option("--topic", "--entity-name", "topic", required=True, help="The topic.")
@click.option("--alter", "action", flag_value="alter", help="Change configs.")
@click.option("--describe", "action", flag_value="describe", help="Show configs.")
@click.option("--add-config", "add", multiple=True, help="k=v[,k=v...] to set.")
@click.option("--delete-config", "delete", multiple=True, help="k[,k...] to remove (back to the default).")
@click.option("--all", "show_all", is_flag=True, help="With --describe, every config, not only overrides.")
@kafka_errors
def configs(data_dir, server_properties, entity_type, topic, action, add, delete, show_all):
    """Alter and describe topic configs (kafka-configs).

    Example: compactlog configs --data-dir data --alter --topic prices --add-config compression.type=zstd
    """
    if action is None:
        raise click.UsageError("one of --alter, --describe is required")
    with open_data_dir(data_dir, server_properties) as cl:
        if action == "alter":
            if not add and not delete:
                raise click.UsageError("--alter needs --add-config or --delete-config")
            names = [n.strip() for item in delete for n in item.split(",") if n.strip()]
            cl.alter_topic_config(topic, parse_key_values(add, "--add-config"), names)
            click.echo(f"Completed updating config for topic {topic}.")
            return
        cfg = cl.describe_topic(topic).config
        click.echo(f"{'All' if show_all else 'Dynamic'} configs for topic {topic} are:")
        for row in cfg.describe():
            if show_all or row.source == "DYNAMIC_TOPIC_CONFIG":
                click.echo(f"  {row.name}={row.value} sensitive=false synonyms={{{row.source}:{row.name}={row.value}}}")
