// Runs before every test file: the Node 20 polyfill, and no AWS credentials or region from the host.
import '../lib/local/polyfills';

for (const name of ['AWS_PROFILE', 'AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN'])
  delete process.env[name];
process.env.AWS_REGION = 'us-east-1';
process.env.AWS_SDK_JS_SUPPRESS_NODE_DEPRECATION_WARNING = '1';
// Handlers log JSON lines through Powertools; tests keep the output readable unless asked otherwise.
process.env.POWERTOOLS_LOG_LEVEL ??= 'SILENT';
