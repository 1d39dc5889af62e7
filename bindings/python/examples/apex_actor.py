"""An Ape-X CartPole actor in Python (numpy), for engram-apex's C++ learner.

It does what the C++ actor (agents/apex/actor.cpp) does, from the tables'
layout in engram's README ("Reference agents"): M CartPole-v1 envs stepped
together, one batched forward pass of the learner's dueling MLP per step,
env i of N exploring with epsilon 0.4^(1 + 7 i/(N-1)), 3-step transitions
with the discount each really had, initial priorities |target - Q| from its
own network, transitions sent 50 or more at a time with the episodes that
ended since (Ape-X's local buffer), parameters pulled from the parameter
table every 400 frames.

    engram-apex --actors 0 --out /tmp/apex &      # the learner, waiting for actors
    python3 bindings/python/examples/apex_actor.py --socket /tmp/apex/engram.sock \\
        --actor-id 0 --actors 1 --envs-per-actor 16

It runs until SIGTERM or Ctrl-C. When the server goes away (an engramd
restarted, or the learner's embedded server gone with it) it connects again
as soon as the server answers with its tables, trying for --reconnect-s
seconds (60) before it gives up, and says once what the outage cost.
"""
import argparse
import signal
import sys
import time

import numpy as np

import engram

GAMMA, N_STEP, PULL_EVERY, HIDDEN = 0.99, 3, 400, 128
LOCAL_BATCH = 50  # transitions a send carries at least, as the C++ actor's


class CartPoles:
    """M CartPole-v1 envs (Barto, Sutton & Anderson 1983; Gymnasium's
    constants): reward 1 a step, terminated past 2.4 or 12 degrees,
    truncated at 500 steps."""
    X_LIMIT, THETA_LIMIT, MAX_STEPS = 2.4, 12 * 2 * np.pi / 360, 500

    def __init__(self, m, rng):
        self.rng = rng
        self.s = rng.uniform(-0.05, 0.05, size=(m, 4))
        self.steps = np.zeros(m, np.int64)

    def reset(self, j):
        self.s[j] = self.rng.uniform(-0.05, 0.05, size=4)
        self.steps[j] = 0

    def step(self, actions):
        x, x_dot, theta, theta_dot = self.s.T.copy()
        force = np.where(actions == 1, 10.0, -10.0)
        cos_t, sin_t = np.cos(theta), np.sin(theta)
        total, pole_ml, half = 1.1, 0.05, 0.5
        temp = (force + pole_ml * theta_dot**2 * sin_t) / total
        theta_acc = (9.8 * sin_t - cos_t * temp) / (half * (4.0 / 3.0 - 0.1 * cos_t**2 / total))
        x_acc = temp - pole_ml * theta_acc * cos_t / total
        self.s = np.stack([x + 0.02 * x_dot, x_dot + 0.02 * x_acc, theta + 0.02 * theta_dot,
                           theta_dot + 0.02 * theta_acc], axis=1)
        self.steps += 1
        terminated = (np.abs(self.s[:, 0]) > self.X_LIMIT) | (np.abs(self.s[:, 2]) > self.THETA_LIMIT)
        truncated = ~terminated & (self.steps >= self.MAX_STEPS)
        return self.s.astype(np.float32), terminated, truncated


class DuelingQ:
    """The learner's network, from the parameter table's floats in the order
    LibTorch registers them: fc1, fc2, value, advantage (weight then bias,
    row-major). Q = V + A - mean(A)."""
    SHAPES = [(HIDDEN, 4), (HIDDEN,), (HIDDEN, HIDDEN), (HIDDEN,), (1, HIDDEN), (1,), (2, HIDDEN), (2,)]
    SIZE = sum(int(np.prod(s)) for s in SHAPES)

    def load(self, flat):
        parts, at = [], 0
        for shape in self.SHAPES:
            n = int(np.prod(shape))
            parts.append(np.array(flat[at:at + n], np.float32).reshape(shape))
            at += n
        self.w1, self.b1, self.w2, self.b2, self.wv, self.bv, self.wa, self.ba = parts

    def __call__(self, obs):
        h = np.maximum(obs @ self.w1.T + self.b1, 0)
        h = np.maximum(h @ self.w2.T + self.b2, 0)
        a = h @ self.wa.T + self.ba
        return h @ self.wv.T + self.bv + a - a.mean(axis=1, keepdims=True)


def read_params(table, have):
    """The newest parameters and their version, or None when nothing newer."""
    try:
        with table.sample_view(batch_size=1, timeout_ms=0) as b:
            version = int(b.view(0, "version")[0])
            if version == have:
                return None
            return version, np.array(b.view(0, "params")[0])
    except engram.RateLimited:
        return None


REPLAY_COLS = [("obs", np.float32, (4,)), ("action", np.int32, ()), ("reward", np.float32, ()),
               ("discount", np.float32, ()), ("next_obs", np.float32, (4,))]
EPISODE_COLS = [("env", np.int32, ()), ("epsilon", np.float32, ()), ("return", np.float32, ()),
                ("length", np.int32, ())]


class Session:
    """What the actor holds of the server: its tables and writers."""

    def __init__(self, client):
        self.params = client.table("params")
        self.replay, self.episodes = client.table("replay"), client.table("episodes")
        # 16 transitions to a chunk, each its own item, as the C++ actors write them.
        self.writer = client.writer(REPLAY_COLS, chunk_length=16, max_item_steps=1)
        self.episode_writer = client.writer(EPISODE_COLS)


def reconnect(client, args, stop, lost):
    """After the server went away: connects again and opens the tables,
    trying every 50 ms, doubling up to 2 s, for args.reconnect_s seconds;
    then one line on stderr for the outage. The new Session, or None."""
    began, at, wait, tries = time.monotonic(), time.strftime("%H:%M:%S UTC", time.gmtime()), 0.05, 0
    while not stop and time.monotonic() - began < args.reconnect_s:
        tries += 1
        try:
            s = Session(client.reconnect())
            print(f"apex_actor {args.actor_id}: the server went away at {at}; back after "
                  f"{time.monotonic() - began:.1f} s ({tries} {'try' if tries == 1 else 'tries'}); lost {lost}", file=sys.stderr, flush=True)
            return s
        except (engram.Disconnected, engram.NotFound, engram.Closed, engram.Timeout):
            time.sleep(wait)
            wait = min(2 * wait, 2.0)
    if not stop:
        print(f"apex_actor {args.actor_id}: the server went away at {at} and was not back within "
              f"{args.reconnect_s} s", file=sys.stderr, flush=True)
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--socket", required=True)
    ap.add_argument("--actor-id", type=int, default=0)
    ap.add_argument("--actors", type=int, default=1)
    ap.add_argument("--envs-per-actor", type=int, default=16)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--reconnect-s", type=float, default=60.0,
                    help="how long to try to reach the server again after it went away (default 60)")
    args = ap.parse_args()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))

    m, total = args.envs_per_actor, args.actors * args.envs_per_actor
    first = args.actor_id * m
    eps = np.array([0.4 if total <= 1 else 0.4 ** (1 + 7 * (first + j) / (total - 1)) for j in range(m)])
    rng = np.random.default_rng([args.seed, 1000003 + args.actor_id])
    envs = CartPoles(m, rng)
    net = DuelingQ()
    frames = 0
    try:
        with engram.connect(args.socket) as client:
            for _ in range(6000):  # the learner makes its tables and publishes first
                try:
                    params = client.table("params")
                    break
                except engram.NotFound:
                    time.sleep(0.01)
            got = None
            while got is None and not stop:
                got = read_params(params, 0)
                time.sleep(0.01) if got is None else None
            if stop:
                return 0
            version, flat = got
            if flat.size != DuelingQ.SIZE:
                sys.exit(f"apex_actor: the parameter table holds {flat.size} floats; CartPole's network has "
                         f"{DuelingQ.SIZE} (is the learner training CartPole?)")
            net.load(flat)
            params.close()  # the session opens it again, with the rest
            s = Session(client)
            obs = envs.s.astype(np.float32)
            pending = [[] for _ in range(m)]  # per env: [obs, action, q, reward_sum, scale, steps]
            ret, length = np.zeros(m, np.float32), np.zeros(m, np.int32)
            last_pull = 0
            out = []  # transitions not sent yet: (obs, action, reward, discount, next_obs, q)
            ended = []  # episodes ended since the last send: (env, epsilon, return, length)

            def send():
                # An episode's last transitions and its record leave together;
                # one burst wakes each table's owner once.
                o_, a_, r_, d_, n_, q_ = (np.array(c) for c in zip(*out))
                best = net(n_.astype(np.float32)).max(axis=1)
                td = r_ + d_ * best - q_
                prio = np.where(np.isfinite(td), np.abs(td) + 1e-6, 1.0)
                s.writer.append_items(s.replay, o_.astype(np.float32), a_.astype(np.int32), r_.astype(np.float32),
                                      d_.astype(np.float32), n_.astype(np.float32), priorities=prio)
                for e in ended:
                    s.episode_writer.append(*e)
                    s.episode_writer.create_item(s.episodes, 1, 1.0)
                out.clear()
                ended.clear()

            while not stop:
                q = net(obs)
                greedy = q.argmax(axis=1)
                explore = rng.random(m) < eps
                actions = np.where(explore, rng.integers(0, 2, size=m), greedy).astype(np.int32)
                next_obs, terminated, truncated = envs.step(actions)
                for j in range(m):
                    pending[j].append([obs[j], actions[j], q[j, actions[j]], 0.0, 1.0, 0])
                    for p in pending[j]:
                        p[3] += p[4] * 1.0
                        p[4] *= GAMMA
                        p[5] += 1
                    end = terminated[j] or truncated[j]
                    while pending[j] and (pending[j][0][5] == N_STEP or end):
                        p = pending[j].pop(0)
                        out.append((p[0], p[1], p[3], 0.0 if terminated[j] else p[4], next_obs[j], p[2]))
                    ret[j] += 1
                    length[j] += 1
                    if end:
                        ended.append((first + j, eps[j], ret[j], length[j]))
                        ret[j], length[j] = 0, 0
                        envs.reset(j)
                        next_obs[j] = envs.s[j]
                obs = next_obs
                frames += m
                pull = frames - last_pull >= PULL_EVERY
                try:
                    if len(out) >= LOCAL_BATCH or (pull and out):
                        send()
                    if pull:
                        last_pull = frames
                        got = read_params(s.params, version)
                        if got:
                            version, flat = got
                            net.load(flat)
                except (engram.Disconnected, engram.Closed):
                    # The envs go on where they were; what was on its way to
                    # the server is gone with it.
                    lost = (f"{len(out)} transitions and {len(ended)} episodes being written, and those the "
                            "server had not applied")
                    out.clear()
                    ended.clear()
                    s = reconnect(client, args, stop, lost)
                    if s is None:
                        break
    except (engram.Disconnected, engram.Closed):
        pass  # gone before the first parameters
    except KeyboardInterrupt:
        pass
    print(f"apex_actor {args.actor_id}: {frames} frames")
    return 0


if __name__ == "__main__":
    sys.exit(main())
