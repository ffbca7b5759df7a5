// Every Jest project: the shared NATS server on this machine runs without authentication, so the
// services the tests start (in process or as child processes, which inherit this environment) are
// told so explicitly. Tests of authentication start their own nats-server with the configuration
// `baton nats-config` writes and pass credentials themselves.
process.env.BATON_NATS_AUTH = process.env.BATON_NATS_AUTH || 'none';
