const { connect, StringCodec } = require('nats');
(async () => {
  const nc = await connect({ servers: '127.0.0.1:4222' });
  const jsm = await nc.jetstreamManager();
  const js = nc.jetstream();
  const stream = 'MBTEST';
  try { await jsm.streams.delete(stream); } catch {}
  await jsm.streams.add({ name: stream, subjects: ['mbt.>'] });
  const big = new Uint8Array(240 * 1024).fill(97);
  const small = new Uint8Array(300).fill(98);
  let n = 0;
  for (let i = 0; i < 1200; i++) { await js.publish('mbt.s', small); n++; }
  for (let i = 0; i < 300; i++) { await js.publish('mbt.b', big); await js.publish('mbt.s', small); n += 2; }
  for (let i = 0; i < 500; i++) { await js.publish('mbt.s', small); n++; }
  console.log('published', n);
  const mode = process.argv[2];
  const t0 = Date.now();
  const c = await js.consumers.get(stream, { filterSubjects: 'mbt.>' });
  let got = 0, last = 0;
  if (mode === 'consume') {
    const msgs = await c.consume({ max_bytes: 8 * 1024 * 1024, expires: 5000 });
    (async () => { for await (const s of await msgs.status()) console.log('status', s.type, s.data); })();
    for await (const m of msgs) { got++; last = m.seq; if (m.info.pending === 0) break; }
  } else {
    while (true) {
      const msgs = await c.fetch({ max_bytes: 8 * 1024 * 1024, expires: 5000 });
      let k = 0; const f0 = Date.now();
      let done = false;
      for await (const m of msgs) { got++; k++; last = m.seq; if (m.info.pending === 0) done = true; }
      if (Date.now() - f0 > 1000) console.log('slow fetch', k, Date.now() - f0);
      if (done) break;
    }
  }
  console.log(mode, 'got', got, 'last', last, 'ms', Date.now() - t0);
  await jsm.streams.delete(stream);
  await nc.close();
})();
