<?php
// lockpick client for malkusch/lock's PHPRedisMutex (Debian php-malkusch-lock), Redlock over N
// masters, over the client protocol. The library's only entry point is synchronized($code): the
// mutex locks, runs $code, unlocks. Each acquire starts synchronized in a Fiber whose $code suspends
// it (the lease is held while it is suspended); the release resumes it, and synchronized unlocks.
//
// The library's promise: the keys expire timeout + 1 s after the attempt began, and unlock throws
// ExecutionOutsideLockException when the code ran longer than timeout s. The timeout is whole
// seconds and also bounds the wait for the lock; lockpick's TTL is the keys' expiry, so the client
// uses timeout = TTL - 1 s (a TTL of at least 2 s) and reports that validity, ending timeout s after
// the winning attempt began, on the client's own clock (microtime). ExecutionOutsideLockException
// at the release (the code outlived the promise) is "lost": the library says the lock was no
// longer held, though it leaves the keys to expire.
require_once 'Malkusch/Lock/autoload.php';

use malkusch\lock\mutex\PHPRedisMutex;

function send(array $m): void { fwrite(STDOUT, json_encode($m) . "\n"); fflush(STDOUT); }

$acquired = new ReflectionProperty(\malkusch\lock\mutex\SpinlockMutex::class, 'acquired');
$acquired->setAccessible(true);
// The token the library stores as the keys' value (lock_KEY on each node): the lease's value, so
// that lockpick's probe, which reads those keys, finds the lease it was told of.
$token = new ReflectionProperty(\malkusch\lock\mutex\RedisMutex::class, 'token');
$token->setAccessible(true);
$redis = [];
$nodes = [];
$to = 0.5;
$held = []; // "key value" => [Fiber, start]
$version = '2.2.1';
while (($line = fgets(STDIN)) !== false) {
    $received = microtime(true);
    $m = json_decode($line, true);
    $id = $m['id'];
    try {
        if ($m['type'] === 'init') {
            $to = max(0.05, intval($m['options']['node_timeout_ms'] ?? '500') / 1000);
            // Connections are made at each acquire for the nodes not connected yet: a process may
            // begin during a partition, and init must not depend on the nodes.
            foreach ($m['nodes'] as $n) {
                $nodes[] = explode(':', $n['addr']);
                $redis[] = new Redis();
            }
            send(['type' => 'init_ok', 'in_reply_to' => $id, 'library' => 'malkusch/lock PHPRedisMutex',
                'version' => $version, 'capabilities' => ['validity' => true, 'token' => false,
                'extend' => false, 'watchdog' => false, 'reentrant' => false]]);
        } elseif ($m['type'] === 'acquire') {
            foreach ($redis as $i => $r) {
                if (!$r->isConnected()) {
                    try {
                        $r->connect($nodes[$i][0], intval($nodes[$i][1]), $to);
                        $r->setOption(Redis::OPT_READ_TIMEOUT, $to);
                    } catch (RedisException $e) {
                        // The mutex counts this node as failed, as it would a node that went away.
                    }
                }
            }
            $timeout = intdiv($m['ttl_ms'], 1000) - 1;
            if ($timeout < 1) {
                send(['type' => 'error', 'in_reply_to' => $id, 'code' => 'bad_request', 'text' => 'malkusch/lock needs a TTL of at least 2s']);
                continue;
            }
            $mutex = new PHPRedisMutex($redis, $m['key'], $timeout);
            $fiber = new Fiber(function () use ($mutex) {
                $mutex->synchronized(function () { Fiber::suspend(); });
            });
            $fiber->start(); // returns when the code suspends, or throws
            // The library measures its promise from the start of the attempt that won, which it
            // keeps in a private field: read it (reading changes nothing the library does).
            $started = $acquired->getValue($mutex);
            $value = $token->getValue($mutex);
            $held[$m['key'] . ' ' . $value] = $fiber;
            // The promise ends timeout s after the winning attempt began: counted from the receipt.
            $validity = ($started + $timeout - $received) * 1000;
            send(['type' => 'acquire_ok', 'in_reply_to' => $id, 'value' => $value, 'validity_ms' => max(0, $validity)]);
        } elseif ($m['type'] === 'release') {
            $fiber = $held[$m['key'] . ' ' . $m['value']];
            unset($held[$m['key'] . ' ' . $m['value']]);
            $fiber->resume();
            send(['type' => 'release_ok', 'in_reply_to' => $id]);
        } else {
            send(['type' => 'error', 'in_reply_to' => $id, 'code' => 'bad_request', 'text' => $m['type']]);
        }
    } catch (\malkusch\lock\exception\TimeoutException $e) {
        send(['type' => 'error', 'in_reply_to' => $id, 'code' => 'held', 'text' => $e->getMessage()]);
    } catch (\malkusch\lock\exception\ExecutionOutsideLockException $e) {
        send(['type' => 'error', 'in_reply_to' => $id, 'code' => 'lost', 'text' => $e->getMessage()]);
    } catch (\malkusch\lock\exception\LockReleaseException $e) {
        // Fewer than a majority of the keys were deleted: taken by others, expired, or nodes that
        // failed (the library logs those and goes on): not known to be lost.
        send(['type' => 'error', 'in_reply_to' => $id, 'code' => 'crashed', 'text' => $e->getMessage()]);
    } catch (\Throwable $e) {
        fwrite(STDERR, "request $id: " . get_class($e) . ': ' . $e->getMessage() . "\n");
        send(['type' => 'error', 'in_reply_to' => $id, 'code' => 'crashed', 'text' => $e->getMessage()]);
    }
}
