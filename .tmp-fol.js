const { connect } = require('nats');
(async () => {
  const nc = await connect({ servers: '127.0.0.1:4222' });
  const jsm = await nc.jetstreamManager();
  const js = nc.jetstream();
  const stream = 'FOLTEST';
  try { await jsm.streams.delete(stream); } catch {}
  await jsm.streams.add({ name: stream, subjects: ['fol.>'] });
  const small = new Uint8Array(400).fill(98);
  const ps = [];
  for (let i = 0; i < 100000; i++) { ps.push(js.publish('fol.s', small)); if (ps.length >= 500) { await Promise.all(ps); ps.length = 0; } }
  await Promise.all(ps);
  for (const n of process.argv.slice(2).map(Number)) {
    for (let r = 0; r < 2; r++) {
      const t0 = Date.now(); const c0 = process.cpuUsage();
      const c = await js.consumers.get(stream, { filterSubjects: 'fol.>' });
      let got = 0;
      await new Promise(async (resolve) => {
        await c.consume({ max_messages: n, expires: 5000, callback: (m) => { got++; if (m.info.pending === 0) resolve(); } });
      });
      const cpu = process.cpuUsage(c0);
      console.log('batch', n, 'got', got, 'ms', Date.now() - t0, 'client cpu ms', Math.round((cpu.user + cpu.system) / 1000));
      await c.delete?.().catch(() => {});
    }
  }
  await jsm.streams.delete(stream);
  await nc.close();
  process.exit(0);
})();
