import {
  CLONE_NAMESPACE_FLAGS,
  ENOSYS,
  EPERM,
  REFUSED,
  SECCOMP_RET_ALLOW,
  SECCOMP_RET_ERRNO,
  seccompArchOf,
  seccompProgram,
  syscallNumber,
  type SeccompArch,
} from './seccomp-filter';

const ARCH = { x86_64: 0xc000003e, aarch64: 0xc00000b7, i386: 0x40000003 };

/**
 * Runs a classic-BPF seccomp program the way the kernel does, on a `seccomp_data` of one call:
 * only the instructions the generator may emit are known; anything else fails the test.
 */
function evaluate(program: Buffer, arch: number, nr: number, arg0 = 0): number {
  const data = Buffer.alloc(64);
  data.writeUInt32LE(nr, 0);
  data.writeUInt32LE(arch, 4);
  data.writeBigUInt64LE(BigInt(arg0), 16);
  let accumulator = 0;
  for (let pc = 0; pc < program.length / 8; pc++) {
    const code = program.readUInt16LE(pc * 8);
    const jt = program.readUInt8(pc * 8 + 2);
    const jf = program.readUInt8(pc * 8 + 3);
    const k = program.readUInt32LE(pc * 8 + 4);
    switch (code) {
      case 0x20:
        accumulator = data.readUInt32LE(k);
        break;
      case 0x15:
        pc += accumulator === k ? jt : jf;
        break;
      case 0x35:
        pc += accumulator >= k ? jt : jf;
        break;
      case 0x45:
        pc += (accumulator & k) !== 0 ? jt : jf;
        break;
      case 0x06:
        return k;
      default:
        throw new Error(`unknown instruction ${code.toString(16)} at ${pc}`);
    }
  }
  throw new Error('the program ran off its end');
}

const refuse = (errno: number) => SECCOMP_RET_ERRNO | errno;

describe.each(['x86_64', 'aarch64'] as const)('seccomp filter for %s', (arch: SeccompArch) => {
  const program = seccompProgram(arch);
  const call = (name: Parameters<typeof syscallNumber>[0], arg0 = 0) =>
    evaluate(program, ARCH[arch], syscallNumber(name, arch), arg0);

  it('is a whole number of 8-byte instructions, few enough for one jump range', () => {
    expect(program.length % 8).toBe(0);
    expect(program.length / 8).toBeLessThan(255);
  });

  it.each(REFUSED)('refuses %s with EPERM', (name) => {
    expect(call(name)).toBe(refuse(EPERM));
  });

  it('refuses clone with any namespace flag, and allows fork and threads', () => {
    for (let bit = 0; bit < 32; bit++) {
      const flag = 2 ** bit;
      if ((CLONE_NAMESPACE_FLAGS & flag) !== 0) {
        expect(call('clone', flag | 0x11)).toBe(refuse(EPERM));
      }
    }
    expect(call('clone', 0x10000000)).toBe(refuse(EPERM)); // CLONE_NEWUSER
    // glibc's fork (CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD) and its threads.
    expect(call('clone', 0x01200011)).toBe(SECCOMP_RET_ALLOW);
    expect(call('clone', 0x003d0f00)).toBe(SECCOMP_RET_ALLOW);
    // Flags in the upper half of the register are ignored by the kernel's clone().
    expect(call('clone', 0x100000000 * 0x10 + 0x11)).toBe(SECCOMP_RET_ALLOW);
  });

  it('answers clone3 with ENOSYS, so that glibc falls back to clone', () => {
    expect(call('clone3')).toBe(refuse(ENOSYS));
  });

  it('allows querying the personality and PER_LINUX only', () => {
    expect(call('personality', 0xffffffff)).toBe(SECCOMP_RET_ALLOW);
    expect(call('personality', 0)).toBe(SECCOMP_RET_ALLOW);
    expect(call('personality', 0x0040000)).toBe(refuse(EPERM)); // ADDR_NO_RANDOMIZE
  });

  it('allows every other call', () => {
    const refused = new Set(
      [...REFUSED, 'clone', 'clone3', 'personality'].map((name) =>
        syscallNumber(name as Parameters<typeof syscallNumber>[0], arch),
      ),
    );
    for (let nr = 0; nr < 512; nr++) {
      if (!refused.has(nr)) {
        expect(evaluate(program, ARCH[arch], nr)).toBe(SECCOMP_RET_ALLOW);
      }
    }
  });

  it('refuses every call of another ABI of the kernel', () => {
    expect(evaluate(program, ARCH.i386, 1)).toBe(refuse(ENOSYS));
    const other = arch === 'x86_64' ? ARCH.aarch64 : ARCH.x86_64;
    expect(evaluate(program, other, 1)).toBe(refuse(ENOSYS));
  });
});

describe('seccomp filter', () => {
  it('refuses the x32 ABI on x86_64', () => {
    expect(evaluate(seccompProgram('x86_64'), ARCH.x86_64, 0x40000000 + 1)).toBe(refuse(ENOSYS));
  });

  it('has an architecture for the machines R runs on, none elsewhere', () => {
    expect(seccompArchOf('x64')).toBe('x86_64');
    expect(seccompArchOf('arm64')).toBe('aarch64');
    expect(seccompArchOf('ppc64')).toBeNull();
  });
});
