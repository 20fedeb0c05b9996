import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { createServer, connect } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';

/** A free TCP port on 127.0.0.1 (closed again before Dovecot binds it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

/** The account the mailboxes and Dovecot's own processes run as: root may not own mail. */
function mailUser(): { name: string; uid: number; gid: number } {
  const me = userInfo();
  if (me.uid !== 0) {
    return { name: me.username, uid: me.uid, gid: me.gid };
  }
  const nobody = spawnSync('id', ['-u', 'nobody'], { encoding: 'utf8' });
  const group = spawnSync('id', ['-g', 'nobody'], { encoding: 'utf8' });
  return { name: 'nobody', uid: Number(nobody.stdout), gid: Number(group.stdout) };
}

export interface Dovecot {
  imapPort: number;
  pop3Port: number;
  /** Users made at start, each with the password `<user>-secret`. */
  users: string[];
  /** Dovecot's log, for a failing test's message. */
  log(): string;
  stop(): Promise<void>;
}

/**
 * A throwaway Dovecot (IMAP and POP3, no TLS, plain passwords) on free ports of 127.0.0.1 with
 * maildirs in a temporary directory: everything it needs is in its own configuration, so it
 * touches nothing of the system's mail set-up.
 */
export async function startDovecot(users: string[]): Promise<Dovecot> {
  const root = mkdtempSync(join(tmpdir(), 'svc-dovecot-'));
  const owner = mailUser();
  const run = join(root, 'run');
  const mail = join(root, 'mail');
  mkdirSync(run);
  mkdirSync(mail);
  if (userInfo().uid === 0) {
    // Dovecot's auth and mail processes run as the mail user: they read the passwd file in here.
    chmodSync(root, 0o755);
    chownSync(mail, owner.uid, owner.gid);
  }
  const [imapPort, pop3Port] = [await freePort(), await freePort()];
  writeFileSync(
    join(root, 'passwd'),
    users.map((user) => `${user}:{PLAIN}${user}-secret::::::\n`).join(''),
  );
  // Modes set, not left to the umask: a service started in this test process makes it 0077, and
  // Dovecot's auth and mail processes (the mail user) must read the passwd file and enter run/.
  chmodSync(join(root, 'passwd'), 0o644);
  chmodSync(run, 0o755);
  const conf = join(root, 'dovecot.conf');
  writeFileSync(
    conf,
    `protocols = imap pop3
listen = 127.0.0.1
base_dir = ${run}
state_dir = ${join(root, 'state')}
instance_name = svc-test-${imapPort}
log_path = ${join(root, 'dovecot.log')}
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
default_login_user = ${owner.name}
default_internal_user = ${owner.name}
first_valid_uid = ${owner.uid}
first_valid_gid = ${owner.gid}
mail_uid = ${owner.uid}
mail_gid = ${owner.gid}
mail_location = maildir:${mail}/%u
pop3_uidl_format = %08Xu%08Xv
passdb {
  driver = passwd-file
  args = ${join(root, 'passwd')}
}
userdb {
  driver = static
  args = uid=${owner.uid} gid=${owner.gid} home=${mail}/%u
}
service imap-login {
  inet_listener imap {
    address = 127.0.0.1
    port = ${imapPort}
  }
  inet_listener imaps {
    port = 0
  }
}
service pop3-login {
  inet_listener pop3 {
    address = 127.0.0.1
    port = ${pop3Port}
  }
  inet_listener pop3s {
    port = 0
  }
}
service anvil {
  chroot =
}
service imap-login {
  chroot =
}
service pop3-login {
  chroot =
}
`,
  );
  // As a daemon (it forks and its starter exits): the service's tests check that it leaves no
  // child processes of theirs running, and Dovecot is not the service's.
  // No pipes: the daemon would hold them open, and spawnSync wait for their end.
  const started = spawnSync('dovecot', ['-c', conf], { stdio: 'ignore' });
  if (started.status !== 0) {
    throw new Error(`dovecot did not start (exit ${started.status}): see ${root}/dovecot.log`);
  }
  const deadline = Date.now() + 20_000;
  while (!((await listening(imapPort)) && (await listening(pop3Port)))) {
    if (Date.now() > deadline) {
      throw new Error(`dovecot does not listen on ${imapPort} and ${pop3Port}: see ${root}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return {
    imapPort,
    pop3Port,
    users,
    log: () => readFileSync(join(root, 'dovecot.log'), 'utf8'),
    async stop() {
      spawnSync('dovecot', ['-c', conf, 'stop'], { stdio: 'ignore' });
      const stopDeadline = Date.now() + 10_000;
      while ((await listening(imapPort)) && Date.now() < stopDeadline) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      rmSync(root, { recursive: true, force: true });
    },
  };
}
