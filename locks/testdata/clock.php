<?php
// A client that answers every acquire with its wall clock (microtime) as the lease value, so that a
// test can see the clock shim move PHP's time.
while (($line = fgets(STDIN)) !== false) {
    $m = json_decode($line, true);
    if ($m['type'] === 'init') {
        $r = ['type' => 'init_ok', 'in_reply_to' => $m['id'], 'library' => 'clock', 'version' => '0',
            'capabilities' => ['validity' => false, 'token' => false, 'extend' => false, 'watchdog' => false, 'reentrant' => false]];
    } else {
        $r = ['type' => 'acquire_ok', 'in_reply_to' => $m['id'], 'value' => sprintf('%.6f', microtime(true))];
    }
    fwrite(STDOUT, json_encode($r) . "\n");
    fflush(STDOUT);
}
