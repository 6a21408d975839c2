// lockpick client for Apache Curator's InterProcessMutex (Debian libcurator-recipes-java), over the
// client protocol (docs/protocol.md).
//
// Configured as a user following Curator's documentation would: one CuratorFramework per program,
// session timeout = the TTL, an exponential-backoff retry policy, and a ConnectionStateListener
// that treats SUSPENDED and LOST as the end of every held lock ("a holder must consider itself no
// longer holding the lock"). InterProcessMutex promises no deadline: a lock node lives as long as
// the session, and the holder learns of its loss only through that listener. So init_ok offers
// watchdog without validity, and each suspension is a lost event about every lease held then.
// The fencing token is the lock node's creation zxid (czxid): unlike the node's sequence number it
// never goes back when ZooKeeper reaps the emptied container node that holds the lock nodes.
//
// InterProcessMutex belongs to the thread that acquired it, so every request runs on the main
// thread; only the listener's lost events come from Curator's event thread.
import java.io.BufferedReader;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.data.Stat;

public final class CuratorLock {
    /** The lock's node paths live under this parent, one child per key. */
    private static final String ROOT = "/lockpick-curator/";

    /** InterProcessMutex with the path of the lock node its owner created, which it keeps protected. */
    static final class Mutex extends InterProcessMutex {
        Mutex(CuratorFramework client, String path) {
            super(client, path);
        }

        String nodePath() {
            return getLockPath();
        }
    }

    private final PrintStream out;
    private final Object outLock = new Object();
    private CuratorFramework client;
    private long ttlMs = 2000;
    private final Map<String, Mutex> mutexes = new HashMap<>();
    /** Leases held now, key -> value (the lock node's path), guarded by itself. */
    private final Map<String, String> held = new HashMap<>();
    /** Counts suspensions, so an acquire that spanned one knows its grant is already void. */
    private long suspensions;

    private CuratorLock(PrintStream out) {
        this.out = out;
    }

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        new CuratorLock(out).serve(new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8)));
    }

    private void serve(BufferedReader in) throws Exception {
        String line;
        while ((line = in.readLine()) != null) {
            Map<String, Object> m = Json.object(line);
            long id = ((Number) m.get("id")).longValue();
            String type = (String) m.get("type");
            try {
                switch (type) {
                    case "init" -> init(id, m);
                    case "acquire" -> acquire(id, (String) m.get("key"));
                    case "release" -> release(id, (String) m.get("key"), (String) m.get("value"));
                    default -> error(id, "bad_request", type);
                }
            } catch (Exception e) {
                System.err.println("request " + id + ": " + e);
                error(id, code(e), String.valueOf(e));
            }
        }
        if (client != null) {
            client.close();
        }
    }

    /** Builds the client; it starts at the first acquire, since a process may begin inside a partition. */
    private void init(long id, Map<String, Object> m) {
        ttlMs = ((Number) m.get("ttl_ms")).longValue();
        List<String> addrs = new ArrayList<>();
        for (Object n : (List<?>) m.get("nodes")) {
            addrs.add((String) ((Map<?, ?>) n).get("addr"));
        }
        int session = (int) ttlMs;
        client = CuratorFrameworkFactory.builder()
                .connectString(String.join(",", addrs))
                .sessionTimeoutMs(session)
                // An operation waits this long for a connection: half the TTL, since a request must
                // finish within the TTL or lockpick counts it unknown.
                .connectionTimeoutMs(Math.max(200, session / 2))
                .retryPolicy(new ExponentialBackoffRetry(100, 2))
                .build();
        client.getConnectionStateListenable().addListener((c, state) -> stateChanged(state));
        // Connecting starts now, in the background (start never waits for a member): a JVM on a busy
        // machine needs more than a request's time to load the client and connect.
        client.start();
        warmUp();
        Map<String, Object> caps = new LinkedHashMap<>();
        caps.put("validity", false);
        caps.put("token", true);
        caps.put("extend", false);
        caps.put("watchdog", true);
        caps.put("reentrant", false);
        Map<String, Object> r = reply("init_ok", id);
        r.put("library", "Apache Curator InterProcessMutex");
        r.put("version", curatorVersion());
        r.put("capabilities", caps);
        send(r);
    }

    /**
     * Loads, before init_ok, the classes the first acquire and release use, without a request to
     * any member: ten JVMs loading them at their first acquire on two busy cores outran the TTL.
     */
    private void warmUp() {
        new Mutex(client, ROOT + "warm-up");
        client.create().creatingParentContainersIfNeeded().withProtection();
        client.getChildren();
        client.checkExists();
        client.delete().guaranteed();
        Json.write(Json.object("{\"a\":[1,\"b\",true,null,{}]}"));
    }

    /** The listener a Curator user writes: a suspended or lost connection ends every lock held. */
    private void stateChanged(ConnectionState state) {
        System.err.println("connection " + state);
        if (state == ConnectionState.CONNECTED || state == ConnectionState.RECONNECTED) {
            try {
                System.err.println("session timeout negotiated: "
                        + client.getZookeeperClient().getZooKeeper().getSessionTimeout() + " ms");
            } catch (Exception e) {
                System.err.println("session timeout unknown: " + e);
            }
        }
        if (state != ConnectionState.SUSPENDED && state != ConnectionState.LOST) {
            return;
        }
        synchronized (held) {
            suspensions++;
            for (Map.Entry<String, String> e : held.entrySet()) {
                Map<String, Object> ev = new LinkedHashMap<>();
                ev.put("type", "lost");
                ev.put("key", e.getKey());
                ev.put("value", e.getValue());
                send(ev);
            }
            held.clear();
        }
    }

    private void acquire(long id, String key) throws Exception {
        // Half the TTL for connecting and waiting for the lock together, as the other shipped
        // clients wait: the rest of the TTL is for the lock node's stat and the reply.
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(ttlMs / 2);
        // Not connected by then: no request has left this client.
        if (!client.getZookeeperClient().isConnected()
                && !client.blockUntilConnected((int) Math.max(1, ttlMs / 2), TimeUnit.MILLISECONDS)) {
            error(id, "unavailable", "not connected to any member");
            return;
        }
        long before;
        synchronized (held) {
            before = suspensions;
        }
        Mutex mutex = mutexes.computeIfAbsent(key, k -> new Mutex(client, ROOT + k));
        long wait = Math.max(0, deadline - System.nanoTime());
        if (!mutex.acquire(wait, TimeUnit.NANOSECONDS)) {
            error(id, "held", "not granted within " + ttlMs / 2 + " ms");
            return;
        }
        String path = mutex.nodePath();
        Stat stat = client.checkExists().forPath(path);
        if (stat == null) {
            // Granted on a node already gone: the session that made it has ended. The outcome for
            // the harness is unknown; the program is retired.
            releaseQuietly(mutex);
            error(id, "crashed", "lock node " + path + " vanished right after the grant");
            return;
        }
        Map<String, Object> r = reply("acquire_ok", id);
        r.put("value", path);
        r.put("token", stat.getCzxid());
        boolean suspended;
        synchronized (held) {
            suspended = suspensions != before;
            if (!suspended) {
                held.put(key, path);
            }
            send(r);
        }
        if (suspended) {
            // The connection was suspended while the acquire ran: the listener's rule says the lock
            // is not held, whatever acquire returned.
            Map<String, Object> ev = new LinkedHashMap<>();
            ev.put("type", "lost");
            ev.put("key", key);
            ev.put("value", path);
            send(ev);
        }
    }

    private void release(long id, String key, String value) throws Exception {
        Mutex mutex = mutexes.get(key);
        if (mutex == null || !mutex.isAcquiredInThisProcess() || !value.equals(mutex.nodePath())) {
            error(id, "lost", "not held");
            return;
        }
        boolean wasHeld;
        synchronized (held) {
            wasHeld = value.equals(held.remove(key));
        }
        try {
            mutex.release();
        } catch (IllegalMonitorStateException e) {
            error(id, "lost", String.valueOf(e));
            return;
        } catch (Exception e) {
            if (wasHeld) {
                throw e; // the lock node's fate is unknown: indefinite, the program is retired
            }
            // The listener had already ended this lease, and the application, as Curator's users
            // do, logs the failed release and goes on with the same session: whatever lock node
            // the failure left behind (CURATOR-678) stays for the others to wait behind.
            System.err.println("release after the lease was lost: " + e);
            error(id, "lost", "released after the connection was suspended: " + e);
            return;
        }
        if (wasHeld) {
            send(reply("release_ok", id));
        } else {
            // Released after the listener had declared the lock lost: the node is gone now, but
            // the lease had already ended.
            error(id, "lost", "the connection was suspended while held");
        }
    }

    private static void releaseQuietly(InterProcessMutex mutex) {
        try {
            mutex.release();
        } catch (Exception e) {
            System.err.println("release after a vanished node: " + e);
        }
    }

    /** Only a connect that never happened certainly sent nothing: every other failure is indefinite. */
    private static String code(Exception e) {
        if (e instanceof KeeperException.ConnectionLossException
                || e instanceof KeeperException.OperationTimeoutException
                || e instanceof KeeperException.SessionExpiredException) {
            return "timeout";
        }
        return "crashed";
    }

    private static String curatorVersion() {
        try (InputStream in = InterProcessMutex.class.getResourceAsStream(
                "/META-INF/maven/org.apache.curator/curator-recipes/pom.properties")) {
            if (in != null) {
                Properties p = new Properties();
                p.load(in);
                return p.getProperty("version", "unknown");
            }
        } catch (Exception e) {
            System.err.println("curator version: " + e);
        }
        String v = InterProcessMutex.class.getPackage().getImplementationVersion();
        return v != null ? v : "unknown";
    }

    private static Map<String, Object> reply(String type, long id) {
        Map<String, Object> r = new LinkedHashMap<>();
        r.put("type", type);
        r.put("in_reply_to", id);
        return r;
    }

    private void error(long id, String code, String text) {
        Map<String, Object> r = reply("error", id);
        r.put("code", code);
        r.put("text", text);
        send(r);
    }

    private void send(Map<String, Object> msg) {
        synchronized (outLock) {
            out.print(Json.write(msg));
            out.print('\n');
            out.flush();
        }
    }

    /** The JSON the protocol needs: objects, arrays, strings, numbers, booleans and null. */
    static final class Json {
        private final String s;
        private int i;

        private Json(String s) {
            this.s = s;
        }

        @SuppressWarnings("unchecked")
        static Map<String, Object> object(String line) {
            Json j = new Json(line);
            Object v = j.value();
            j.space();
            if (!(v instanceof Map) || j.i != line.length()) {
                throw new IllegalArgumentException("not a JSON object: " + line);
            }
            return (Map<String, Object>) v;
        }

        private void space() {
            while (i < s.length() && Character.isWhitespace(s.charAt(i))) {
                i++;
            }
        }

        private Object value() {
            space();
            char c = s.charAt(i);
            switch (c) {
                case '{': {
                    Map<String, Object> m = new LinkedHashMap<>();
                    i++;
                    space();
                    if (s.charAt(i) == '}') {
                        i++;
                        return m;
                    }
                    while (true) {
                        space();
                        String k = string();
                        space();
                        expect(':');
                        m.put(k, value());
                        space();
                        if (s.charAt(i++) == '}') {
                            return m;
                        }
                    }
                }
                case '[': {
                    List<Object> l = new ArrayList<>();
                    i++;
                    space();
                    if (s.charAt(i) == ']') {
                        i++;
                        return l;
                    }
                    while (true) {
                        l.add(value());
                        space();
                        if (s.charAt(i++) == ']') {
                            return l;
                        }
                    }
                }
                case '"':
                    return string();
                default:
                    break;
            }
            for (String word : new String[] {"true", "false", "null"}) {
                if (s.startsWith(word, i)) {
                    i += word.length();
                    return word.equals("null") ? null : Boolean.valueOf(word);
                }
            }
            int start = i;
            while (i < s.length() && "+-0123456789.eE".indexOf(s.charAt(i)) >= 0) {
                i++;
            }
            String num = s.substring(start, i);
            if (num.isEmpty()) {
                throw new IllegalArgumentException("bad JSON at " + start + ": " + s);
            }
            return num.matches("-?\\d+") ? (Object) Long.valueOf(num) : (Object) Double.valueOf(num);
        }

        private void expect(char c) {
            if (s.charAt(i++) != c) {
                throw new IllegalArgumentException("expected " + c + " at " + (i - 1) + ": " + s);
            }
        }

        private String string() {
            expect('"');
            StringBuilder b = new StringBuilder();
            while (true) {
                char c = s.charAt(i++);
                if (c == '"') {
                    return b.toString();
                }
                if (c != '\\') {
                    b.append(c);
                    continue;
                }
                char e = s.charAt(i++);
                switch (e) {
                    case 'n' -> b.append('\n');
                    case 't' -> b.append('\t');
                    case 'r' -> b.append('\r');
                    case 'b' -> b.append('\b');
                    case 'f' -> b.append('\f');
                    case 'u' -> {
                        b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
                        i += 4;
                    }
                    default -> b.append(e);
                }
            }
        }

        static String write(Object v) {
            StringBuilder b = new StringBuilder();
            write(b, v);
            return b.toString();
        }

        private static void write(StringBuilder b, Object v) {
            if (v == null) {
                b.append("null");
            } else if (v instanceof String str) {
                b.append('"');
                for (char c : str.toCharArray()) {
                    if (c == '"' || c == '\\') {
                        b.append('\\').append(c);
                    } else if (c < 0x20) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
                b.append('"');
            } else if (v instanceof Map<?, ?> m) {
                b.append('{');
                boolean first = true;
                for (Map.Entry<?, ?> e : m.entrySet()) {
                    if (!first) {
                        b.append(',');
                    }
                    first = false;
                    write(b, String.valueOf(e.getKey()));
                    b.append(':');
                    write(b, e.getValue());
                }
                b.append('}');
            } else {
                b.append(v);
            }
        }
    }
}
