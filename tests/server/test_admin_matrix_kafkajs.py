"""Every public method of kafkajs's admin client against a real ``compactlog serve``: each works, or gets
the answer Kafka gives on a single-node cluster. One Node.js run calls them all (each step's outcome is
kept, so one failure does not hide the others); each test below checks one method's outcome.
``test_every_method_is_covered`` fails when a kafkajs release adds a method this module does not call.
kafkajs is installed from the npm registry on first use (tests/server/kafkajs_support.py); without node,
npm or the registry the module is skipped, saying which. docs/admin-clients.md lists the outcomes."""

from __future__ import annotations

import pytest
import wire
from kafkajs_support import kafkajs_or_skip, run_node

TOPIC, GROUP = "js-data", "js-group"

SCRIPT = r"""
const { Kafka, logLevel, ConfigResourceTypes, AclResourceTypes, AclOperationTypes, AclPermissionTypes,
        ResourcePatternTypes } = kafkajs;
const kafka = new Kafka({ clientId: 'admin-matrix', brokers: [ARGS.broker], logLevel: logLevel.NOTHING,
                          retry: { retries: 0 }, requestTimeout: 10000 });
const admin = kafka.admin();
const out = { methods: Object.keys(admin).sort() };
const step = async (name, fn) => {
  try { out[name] = { ok: (await fn()) ?? null }; }
  catch (e) {
    out[name] = { error: { name: e.name, type: e.type || null, message: e.message,
      groups: e.groups ? e.groups.map((g) => ({ groupId: g.groupId, type: g.error && g.error.type })) : undefined,
      errors: e.errors ? e.errors.map((x) => ({ type: x.type || null, message: x.message })) : undefined,
      partitions: e.partitions ? e.partitions.map((p) => ({ partition: p.partition, name: p.error && p.error.name,
        type: p.error && p.error.type })) : undefined,
      cause: e.cause ? e.cause.type || e.cause.name : undefined } };
  }
};
const T = ARGS.topic, G = ARGS.group;

let connected = false;
await step('on', async () => { admin.on(admin.events.CONNECT, () => { connected = true; }); return true; });
await step('connect', async () => { await admin.connect(); return connected; });
await step('events', async () => Object.keys(admin.events).sort());
await step('logger', async () => typeof admin.logger().info);

// data the other steps read: T with 3 partitions, 10 records in partition 0 at times 1000.., GROUP at 7
await admin.createTopics({ topics: [{ topic: T, numPartitions: 3, replicationFactor: 1 }], waitForLeaders: true });
const producer = kafka.producer();
await producer.connect();
await producer.send({ topic: T, messages: [...Array(10).keys()].map((i) => (
  { key: `k${i}`, value: `v${i}`, partition: 0, timestamp: String(1000 + i) })) });
await producer.disconnect();

await step('createTopics', async () => [
  await admin.createTopics({ topics: [{ topic: 'js-new', numPartitions: 2, configEntries: [{ name: 'cleanup.policy', value: 'compact' }] }] }),
  await admin.createTopics({ topics: [{ topic: 'js-new' }] }),
  // not waiting for leaders: a validated topic has none (kafkajs would wait for them and fail)
  await admin.createTopics({ topics: [{ topic: 'js-dry' }], validateOnly: true, waitForLeaders: false }),
]);
await step('createTopics-rf3', () => admin.createTopics({ topics: [{ topic: 'js-three', replicationFactor: 3 }] }));
await step('listTopics', () => admin.listTopics());
await step('fetchTopicMetadata', async () => (await admin.fetchTopicMetadata({ topics: [T] })).topics.map(
  (t) => ({ name: t.name, partitions: t.partitions.map((p) => [p.partitionId, p.leader]).sort() })));
await step('fetchTopicMetadata-unknown', () => admin.fetchTopicMetadata({ topics: ['js-nope'] }));
await step('createPartitions', async () => {
  await admin.createTopics({ topics: [{ topic: 'js-grow' }] });
  await admin.createPartitions({ topicPartitions: [{ topic: 'js-grow', count: 3 }] });
  return (await admin.fetchTopicMetadata({ topics: ['js-grow'] })).topics[0].partitions.length;
});
await step('createPartitions-fewer', () => admin.createPartitions({ topicPartitions: [{ topic: 'js-grow', count: 2 }] }));
await step('deleteTopics', async () => {
  await admin.createTopics({ topics: [{ topic: 'js-gone' }] });
  await admin.deleteTopics({ topics: ['js-gone'] });
  return (await admin.listTopics()).includes('js-gone');
});
await step('deleteTopics-unknown', () => admin.deleteTopics({ topics: ['js-gone-twice'] }));
await step('fetchTopicOffsets', async () => (await admin.fetchTopicOffsets(T)).sort((a, b) => a.partition - b.partition));
await step('fetchTopicOffsetsByTimestamp', () => admin.fetchTopicOffsetsByTimestamp(T, 1004));
await step('deleteTopicRecords', async () => {
  await admin.createTopics({ topics: [{ topic: 'js-trim' }] });
  const p = kafka.producer(); await p.connect();
  await p.send({ topic: 'js-trim', messages: [1, 2, 3, 4, 5].map((i) => ({ value: `r${i}` })) });
  await p.disconnect();
  await admin.fetchTopicMetadata({ topics: ['js-trim'] });  // kafkajs finds leaders in its cached metadata only
  await admin.deleteTopicRecords({ topic: 'js-trim', partitions: [{ partition: 0, offset: '3' }] });
  return (await admin.fetchTopicOffsets('js-trim'))[0];
});
await step('setOffsets', async () => {
  await admin.setOffsets({ groupId: G, topic: T, partitions: [{ partition: 0, offset: '7' }] });
  await admin.setOffsets({ groupId: 'js-doomed', topic: T, partitions: [{ partition: 0, offset: '1' }] });
  return true;
});
await step('fetchOffsets', () => admin.fetchOffsets({ groupId: G, topics: [T] }));
await step('resetOffsets', async () => {
  await admin.resetOffsets({ groupId: G, topic: T, earliest: true });
  return admin.fetchOffsets({ groupId: G, topics: [T] });
});
await step('listGroups', () => admin.listGroups());
await step('describeGroups', () => admin.describeGroups([G, 'js-never']));
await step('deleteGroups', () => admin.deleteGroups(['js-doomed']));
await step('deleteGroups-unknown', () => admin.deleteGroups(['js-doomed']));
await step('describeCluster', () => admin.describeCluster());
await step('describeConfigs', async () => {
  const r = await admin.describeConfigs({ includeSynonyms: false, resources: [
    { type: ConfigResourceTypes.TOPIC, name: T, configNames: ['cleanup.policy'] },
    { type: ConfigResourceTypes.BROKER, name: '1', configNames: ['log.dirs'] }] });
  return r.resources.map((x) => ({ name: x.resourceName, errorCode: x.errorCode,
    entries: x.configEntries.map((e) => [e.configName, typeof e.configValue]) }));
});
await step('describeConfigs-unknown', () => admin.describeConfigs({ includeSynonyms: false,
  resources: [{ type: ConfigResourceTypes.TOPIC, name: 'js-nope' }] }));
await step('alterConfigs', async () => {
  await admin.alterConfigs({ validateOnly: false, resources: [{ type: ConfigResourceTypes.TOPIC, name: T,
    configEntries: [{ name: 'retention.ms', value: '86400000' }] }] });
  const r = await admin.describeConfigs({ includeSynonyms: false,
    resources: [{ type: ConfigResourceTypes.TOPIC, name: T, configNames: ['retention.ms'] }] });
  return r.resources[0].configEntries[0].configValue;
});
await step('alterConfigs-invalid', () => admin.alterConfigs({ validateOnly: false, resources: [
  { type: ConfigResourceTypes.TOPIC, name: T, configEntries: [{ name: 'retention.ms', value: 'soon' }] }] }));
const acl = { resourceType: AclResourceTypes.TOPIC, resourceName: 'js-acl', resourcePatternType: ResourcePatternTypes.LITERAL,
              principal: 'User:nobody', host: '*', operation: AclOperationTypes.READ, permissionType: AclPermissionTypes.ALLOW };
const aclFilter = { ...acl, resourcePatternType: ResourcePatternTypes.ANY, operation: AclOperationTypes.ANY,
                    permissionType: AclPermissionTypes.ANY };
await step('createAcls', () => admin.createAcls({ acl: [acl] }));
await step('describeAcls', async () => (await admin.describeAcls(aclFilter)).resources.map(
  (r) => [r.resourceName, r.acls.map((a) => a.principal)]));
await step('deleteAcls', async () => (await admin.deleteAcls({ filters: [aclFilter] })).filterResponses.map(
  (f) => f.matchingAcls.map((m) => m.principal)));
await step('alterPartitionReassignments', () => admin.alterPartitionReassignments({
  topics: [{ topic: T, partitionAssignment: [{ partition: 0, replicas: [1] }] }] }));
await step('listPartitionReassignments', () => admin.listPartitionReassignments({ topics: [{ topic: T, partitions: [0, 1, 2] }] }));
await step('disconnect', async () => { await admin.disconnect(); return true; });
return out;
"""


@pytest.fixture(scope="module")
def outcome(tmp_path_factory):
    kafkajs_or_skip()
    # allow.everyone.if.no.acl.found: the ACL step's rule names one topic; everything else stays open
    with wire.serving(tmp_path_factory.mktemp("admin-kafkajs") / "data",
                      {"allow.everyone.if.no.acl.found": "true"}) as s:
        yield run_node(SCRIPT, {"broker": s.bootstrap, "topic": TOPIC, "group": GROUP}, timeout=120)


def ok(outcome, step):
    got = outcome[step]
    assert "ok" in got, got
    return got["ok"]


def error(outcome, step):
    got = outcome[step]
    assert "error" in got, got
    return got["error"]


def test_every_method_is_covered(outcome):
    tested = {name[len("test_"):] for name in globals() if name.startswith("test_")}
    assert set(outcome["methods"]) - tested == set()


def test_on(outcome):
    assert ok(outcome, "on") is True


def test_connect(outcome):
    assert ok(outcome, "connect") is True  # and the CONNECT event came


def test_events(outcome):
    assert "admin.connect" not in ok(outcome, "events") and "CONNECT" in ok(outcome, "events")


def test_logger(outcome):
    assert ok(outcome, "logger") == "function"


def test_disconnect(outcome):
    assert ok(outcome, "disconnect") is True


def test_createTopics(outcome):
    assert ok(outcome, "createTopics") == [True, False, True]  # made; already there (kafkajs: false); validated
    assert "js-dry" not in ok(outcome, "listTopics")
    e = error(outcome, "createTopics-rf3")
    assert [x["type"] for x in e["errors"]] == ["INVALID_REPLICATION_FACTOR"], e


def test_listTopics(outcome):
    assert {TOPIC, "js-new"} <= set(ok(outcome, "listTopics"))


def test_fetchTopicMetadata(outcome):
    assert ok(outcome, "fetchTopicMetadata") == [{"name": TOPIC, "partitions": [[0, 1], [1, 1], [2, 1]]}]
    assert error(outcome, "fetchTopicMetadata-unknown")["type"] == "UNKNOWN_TOPIC_OR_PARTITION"


def test_createPartitions(outcome):
    assert ok(outcome, "createPartitions") == 3
    assert error(outcome, "createPartitions-fewer")["type"] == "INVALID_PARTITIONS"


def test_deleteTopics(outcome):
    assert ok(outcome, "deleteTopics") is False  # gone from the list
    e = error(outcome, "deleteTopics-unknown")  # retriable in kafkajs: given up after its retries (0 here)
    assert (e["name"], e["cause"]) == ("KafkaJSNumberOfRetriesExceeded", "UNKNOWN_TOPIC_OR_PARTITION"), e


def test_fetchTopicOffsets(outcome):
    got = [(p["partition"], p["low"], p["high"]) for p in ok(outcome, "fetchTopicOffsets")]
    assert got == [(0, "0", "10"), (1, "0", "0"), (2, "0", "0")]


def test_fetchTopicOffsetsByTimestamp(outcome):
    got = {p["partition"]: p["offset"] for p in ok(outcome, "fetchTopicOffsetsByTimestamp")}
    assert got == {0: "4", 1: "0", 2: "0"}  # the first record at or after 1004; empty partitions: their end


def test_deleteTopicRecords(outcome):
    got = ok(outcome, "deleteTopicRecords")
    assert (got["low"], got["high"]) == ("3", "5")


def test_setOffsets(outcome):
    assert ok(outcome, "setOffsets") is True


def test_fetchOffsets(outcome):
    got = ok(outcome, "fetchOffsets")
    assert [(t["topic"], sorted((p["partition"], p["offset"]) for p in t["partitions"])) for t in got] == \
        [(TOPIC, [(0, "7"), (1, "-1"), (2, "-1")])]


def test_resetOffsets(outcome):
    got = ok(outcome, "resetOffsets")
    assert {p["partition"]: p["offset"] for p in got[0]["partitions"]}[0] == "-2"  # kafkajs writes "earliest" as -2


def test_listGroups(outcome):
    groups = {g["groupId"]: g["protocolType"] for g in ok(outcome, "listGroups")["groups"]}
    assert groups[GROUP] == "consumer"  # kafkajs's setOffsets joins the group with a consumer first


def test_describeGroups(outcome):
    got = {g["groupId"]: (g["errorCode"], g["state"], g["members"]) for g in ok(outcome, "describeGroups")["groups"]}
    assert got == {GROUP: (0, "Empty", []), "js-never": (0, "Dead", [])}  # Kafka: an unknown group is Dead


def test_deleteGroups(outcome):
    assert [(g["groupId"], g["errorCode"]) for g in ok(outcome, "deleteGroups")] == [("js-doomed", 0)]
    e = error(outcome, "deleteGroups-unknown")
    assert e["groups"] == [{"groupId": "js-doomed", "type": "GROUP_ID_NOT_FOUND"}], e


def test_describeCluster(outcome):
    got = ok(outcome, "describeCluster")
    assert [b["nodeId"] for b in got["brokers"]] == [1] and got["controller"] == 1 and got["clusterId"]


def test_describeConfigs(outcome):
    assert ok(outcome, "describeConfigs") == [
        {"name": TOPIC, "errorCode": 0, "entries": [["cleanup.policy", "string"]]},
        {"name": "1", "errorCode": 0, "entries": [["log.dirs", "string"]]}]
    assert error(outcome, "describeConfigs-unknown")["type"] == "UNKNOWN_TOPIC_OR_PARTITION"


def test_alterConfigs(outcome):
    assert ok(outcome, "alterConfigs") == "86400000"
    assert error(outcome, "alterConfigs-invalid")["type"] == "INVALID_CONFIG"


def test_createAcls(outcome):
    assert ok(outcome, "createAcls") is True


def test_describeAcls(outcome):
    assert ok(outcome, "describeAcls") == [["js-acl", ["User:nobody"]]]


def test_deleteAcls(outcome):
    assert ok(outcome, "deleteAcls") == [["User:nobody"]]


def test_alterPartitionReassignments(outcome):
    """Onto the replica it already has: Kafka accepts it, and it is done at once."""
    assert "ok" in outcome["alterPartitionReassignments"], outcome["alterPartitionReassignments"]


def test_listPartitionReassignments(outcome):
    assert ok(outcome, "listPartitionReassignments") == {"topics": []}  # none in progress
