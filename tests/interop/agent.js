// One kafkajs consumer process for the interop tests: agent.py's arguments
// (without CLIENT), stdin commands and stdout records (spec/OBSERVED.md).
//
//   node agent.js NAME --bootstrap HOST:PORT --group G --topic T [--instance-id ID] [--session-ms MS]
//
// kafkajs (eager, its RoundRobinAssigner) has no rebalance listener. When a rebalance
// stops its fetching it emits REBALANCING before it rejoins (runner.js, kafkajs 2.2.4:
// fetchManager.start fails, REBALANCING, then joinAndSync): eager, so everything it
// owned is "revoked" there, when its processing stopped and before its JoinGroup; its
// GROUP_JOIN event carries the new assignment once SyncGroup has answered, "assigned"
// then. A rejoin without REBALANCING revokes at GROUP_JOIN what left the assignment,
// which closes an interval no earlier than kafkajs stopped processing (an
// over-approximation, as spec/OBSERVED.md asks). Diffing at GROUP_JOIN alone logged a
// member's new partition before the member that gave it up logged its revocation,
// an overlap of a millisecond that no pause explains (conform's clients side). Nor does kafkajs
// tell the application that its membership was lost (runner.js: UNKNOWN_MEMBER_ID
// clears the member id and rejoins, saying so only in its log): the agent reads
// that log line as the loss of everything it owned (docs/explanation/findings.md). kafkajs ignores
// group.instance.id (it has no static membership), so --instance-id is refused.
const { Kafka, logLevel } = require('kafkajs')
const readline = require('readline')

const args = process.argv.slice(2)
const name = args[0]
const opt = (flag, fallback) => (args.includes(flag) ? args[args.indexOf(flag) + 1] : fallback)
if (opt('--instance-id')) {
  console.error('kafkajs has no static membership (group.instance.id)')
  process.exit(2)
}
const topic = opt('--topic')
const say = (event, fields) => process.stdout.write(JSON.stringify({ t_ms: Date.now(), member: name, event, ...fields }) + '\n')
const tps = ps => [...ps].sort((a, b) => a - b).map(partition => ({ topic, partition }))

const kafka = new Kafka({
  clientId: name,
  brokers: [opt('--bootstrap')],
  logLevel: logLevel.ERROR,
  logCreator: () => ({ namespace, log }) => {
    if (log.message.startsWith('The coordinator is not aware of this member')) lost()
    process.stderr.write(`${namespace} ${log.message}\n`)
  }
})
const consumer = kafka.consumer({
  groupId: opt('--group'),
  sessionTimeout: Number(opt('--session-ms', '6000')),
  rebalanceTimeout: 30000,
  heartbeatInterval: 300,
  metadataMaxAge: 1000
})

let owned = new Set()
function lost () {
  if (owned.size) say('lost', { partitions: tps(owned) })
  owned = new Set()
}
consumer.on(consumer.events.REBALANCING, () => {
  if (owned.size) say('revoked', { partitions: tps(owned) })
  owned = new Set()
})
consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
  const now = new Set(payload.memberAssignment[topic] || [])
  const revoked = [...owned].filter(p => !now.has(p))
  if (revoked.length) say('revoked', { partitions: tps(revoked) })
  say('assigned', { partitions: tps([...now].filter(p => !owned.has(p))) })
  owned = now
})

async function commit (partition, offset) {
  const sent = Date.now()
  const offsets = [{ topic, partition, offset }]
  try {
    await consumer.commitOffsets([{ topic, partition, offset: String(offset) }])
    say('commit', { offsets, outcome: 'ok', sent_ms: sent })
  } catch (e) {
    say('commit', { offsets, outcome: 'error', sent_ms: sent, error: e.type || e.name })
  }
}

async function main () {
  await consumer.connect()
  await consumer.subscribe({ topics: [topic] })
  await consumer.run({ autoCommitInterval: 500, eachMessage: async () => {} })
  const pending = []
  for await (const line of readline.createInterface({ input: process.stdin })) {
    const [command, partition, offset] = line.trim().split(/\s+/)
    if (command === 'commit' && owned.has(Number(partition))) pending.push(commit(Number(partition), Number(offset)))
    else if (command === 'close') break
  }
  await Promise.all(pending)
  await consumer.disconnect()
  if (owned.size) say('revoked', { partitions: tps(owned) })
  say('closed', {})
  process.exit(0)
}

main().catch(e => {
  process.stderr.write(`${e.stack}\n`)
  process.exit(1)
})
