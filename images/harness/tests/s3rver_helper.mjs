// Starts s3rver on 127.0.0.1 for the harness's Python tests and prints {"port": N} once it listens.
// Usage: node s3rver_helper.mjs <directory> <bucket>...; it stops when its stdin closes (the test ended).
import S3rver from 's3rver';

const [directory, ...buckets] = process.argv.slice(2);
if (!directory) {
  console.error('usage: node s3rver_helper.mjs <directory> <bucket>...');
  process.exit(2);
}
const server = new S3rver({
  address: '127.0.0.1',
  port: 0,
  silent: true,
  directory,
  allowMismatchedSignatures: true,
  configureBuckets: buckets.map((name) => ({ name })),
});
const address = await server.run();
process.stdout.write(`${JSON.stringify({ port: address.port })}\n`);
process.stdin.resume();
process.stdin.on('end', async () => {
  await server.close();
  process.exit(0);
});
