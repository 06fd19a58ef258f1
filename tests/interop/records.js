// kafkajs against rebalance serve's records and admin APIs, for tests/test_interop_records.py:
//
//   node records.js HOST:PORT TOPIC COUNT GROUP
//
// creates TOPIC (2 partitions) through the admin client, lists every topic,
// produces COUNT records (key k<i>, value <i>, a header) with gzip, consumes them back
// in group GROUP from the earliest offset, lists the groups, deletes GROUP once its
// consumer has left, and prints one JSON object: {topics, produced, consumed, groups,
// deleted}. Exit 1 with the error on stderr on any failure.
const { Kafka, logLevel, CompressionTypes } = require('kafkajs')

const [bootstrap, topic, countText, groupId] = process.argv.slice(2)
const count = Number(countText)
const kafka = new Kafka({ clientId: 'records-js', brokers: [bootstrap], logLevel: logLevel.ERROR })

async function main () {
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({ topics: [{ topic, numPartitions: 2 }] })
  const topics = (await admin.listTopics()).sort()

  const producer = kafka.producer({ idempotent: true, maxInFlightRequests: 1 })
  await producer.connect()
  const messages = []
  for (let i = 0; i < count; i++) messages.push({ key: `k${i}`, value: `${i}`, headers: { h: 'v' }, partition: i % 2 })
  const sent = await producer.send({ topic, messages, compression: CompressionTypes.GZIP, acks: -1 })
  await producer.disconnect()

  const consumer = kafka.consumer({ groupId, sessionTimeout: 6000, heartbeatInterval: 300, maxWaitTimeInMs: 200 })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const consumed = []
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`consumed ${consumed.length} of ${count} in 30 s`)), 30000)
    consumer.run({
      eachMessage: async ({ partition, message }) => {
        consumed.push({ partition, offset: Number(message.offset), key: message.key.toString(), value: message.value.toString(), header: message.headers.h.toString() })
        if (consumed.length === count) { clearTimeout(timer); resolve() }
      }
    }).catch(reject)
  })
  const groups = (await admin.listGroups()).groups.map(g => g.groupId)
  await consumer.disconnect()
  const deleted = await admin.deleteGroups([groupId])
  await admin.disconnect()
  process.stdout.write(JSON.stringify({ topics, produced: sent.length, consumed, groups, deleted: deleted.map(d => [d.groupId, d.errorCode]) }) + '\n')
}

main().then(() => process.exit(0), e => { process.stderr.write(`${e.stack || e}\n`); process.exit(1) })
