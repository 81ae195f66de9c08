// A @platformatic/kafka group consumer for examples/make_kafka_captures.py (platformatic-churn).
//   node examples/platformatic_consumer.mjs PACKAGE_DIR BOOTSTRAP TOPIC GROUP CLIENT_ID SECONDS [MAX_WAIT_MS]
// PACKAGE_DIR is an installed @platformatic/kafka (tools/install_node.sh: /opt/fetchtool-node/node_modules/
// platformatic-old is 2.2.3, which sends fetch session (0, 0) on every Fetch, its issue #315). Reads from the
// earliest offset for SECONDS, prints one line per record to stdout and a summary line to stderr, then closes.
import { pathToFileURL } from 'node:url'
import { join } from 'node:path'
import { readFileSync } from 'node:fs'

const [pkgDir, bootstrap, topic, groupId, clientId, seconds, maxWait] = process.argv.slice(2)
const pkg = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8'))
const { Consumer, stringDeserializers } = await import(pathToFileURL(join(pkgDir, typeof pkg.exports === 'string' ? pkg.exports : (pkg.main ?? 'dist/index.js'))).href)

const consumer = new Consumer({
  groupId,
  clientId,
  bootstrapBrokers: bootstrap.split(','),
  deserializers: stringDeserializers
})
let n = 0
const stream = await consumer.consume({
  autocommit: true,
  topics: [topic],
  mode: 'earliest',
  maxWaitTime: Number(maxWait ?? 500),
  sessionTimeout: 10000,
  heartbeatInterval: 1000
})
stream.on('data', m => { n++; process.stdout.write(`${m.partition} ${m.offset}\n`) })
stream.on('error', e => process.stderr.write(`stream error: ${e}\n`))
const stop = async () => {
  process.stderr.write(`platformatic ${pkg.version} ${clientId}: ${n} records\n`)
  try { await stream.close(); await consumer.close() } catch (e) { process.stderr.write(`close: ${e}\n`) }
  process.exit(0)
}
process.on('SIGTERM', stop)
setTimeout(stop, Number(seconds) * 1000)
