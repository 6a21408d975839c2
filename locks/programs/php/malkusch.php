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
// the code entered (the winning attempt began a few SETs earlier: a promise a round trip longer
// than the library's, never shorter), on the client's own clock (microtime).
require_once 'Malkusch/Lock/autoload.php';

use malkusch\lock\mutex\PHPRedisMutex;

function send(array $m): void { fwrite(STDOUT, json_encode($m) . "\n"); fflush(STDOUT); }

$redis = [];
$held = []; // "key value" => [Fiber, start]
$version = '2.2.1';
while (($line = fgets(STDIN)) !== false) {
    $received = microtime(true);
    $m = json_decode($line, true);
    $id = $m['id'];
    try {
        if ($m['type'] === 'init') {
            $to = max(0.05, intval($m['options']['node_timeout_ms'] ?? '500') / 1000);
            foreach ($m['nodes'] as $n) {
                [$host, $port] = explode(':', $n['addr']);
                $r = new Redis();
                $r->connect($host, intval($port), $to);
                $r->setOption(Redis::OPT_READ_TIMEOUT, $to);
                $redis[] = $r;
            }
            send(['type' => 'init_ok', 'in_reply_to' => $id, 'library' => 'malkusch/lock PHPRedisMutex',
                'version' => $version, 'capabilities' => ['validity' => true, 'token' => false,
                'extend' => false, 'watchdog' => false, 'reentrant' => false]]);
        } elseif ($m['type'] === 'acquire') {
            $timeout = intdiv($m['ttl_ms'], 1000) - 1;
            if ($timeout < 1) {
                send(['type' => 'error', 'in_reply_to' => $id, 'code' => 'bad_request', 'text' => 'malkusch/lock needs a TTL of at least 2s']);
                continue;
            }
            $mutex = new PHPRedisMutex($redis, $m['key'], $timeout);
            $fiber = new Fiber(function () use ($mutex) {
                $mutex->synchronized(function () { Fiber::suspend(microtime(true)); });
            });
            $entered = $fiber->start(); // returns when the code suspends, or throws
            $value = bin2hex(random_bytes(8));
            $held[$m['key'] . ' ' . $value] = $fiber;
            // The promise ends timeout s after the winning attempt began, which is just before the
            // code entered (the attempt's SETs lie between): counted from the request's receipt.
            $validity = ($entered + $timeout - $received) * 1000;
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
        send(['type' => 'error', 'in_reply_to' => $id, 'code' => 'lost', 'text' => $e->getMessage()]);
    } catch (\Throwable $e) {
        fwrite(STDERR, "request $id: " . get_class($e) . ': ' . $e->getMessage() . "\n");
        send(['type' => 'error', 'in_reply_to' => $id, 'code' => 'crashed', 'text' => $e->getMessage()]);
    }
}
