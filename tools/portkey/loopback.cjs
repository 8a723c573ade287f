// Preloaded into Portkey's gateway (node --require) by internal/realserver:
// the gateway listens on every interface and has no option to bind one;
// this makes every TCP listen of the process bind 127.0.0.1, so that
// nothing of it is open beyond the test's host.
const net = require('net');
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === 'number' || (typeof args[0] === 'string' && /^\d+$/.test(args[0]))) {
    return listen.call(this, Number(args[0]), '127.0.0.1', args.find((a) => typeof a === 'function'));
  }
  if (args[0] && typeof args[0] === 'object' && args[0].path === undefined) {
    args[0] = { ...args[0], host: '127.0.0.1' };
  }
  return listen.apply(this, args);
};
