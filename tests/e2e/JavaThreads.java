// SPDX-License-Identifier: LGPL-2.1-or-later
// A JVM for the real_java test: three threads each append a counter to a
// file of their own every 20 ms; "ready" is written once all have
// written; the program ends (status 0) when a file "stop" appears, after
// checking that each counter file holds 0, 1, 2... without a gap.
import java.io.*;
import java.nio.file.*;
import java.util.*;

public class JavaThreads {
    public static void main(String[] args) throws Exception {
        Path dir = Paths.get(args[0]);
        List<Thread> ts = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            final Path f = dir.resolve("count" + i);
            Thread t = new Thread(() -> {
                try (Writer w = Files.newBufferedWriter(f)) {
                    for (long n = 0; ; n++) {
                        w.write(n + "\n");
                        w.flush();
                        Thread.sleep(20);
                    }
                } catch (Exception e) {
                    e.printStackTrace();
                    System.exit(3);
                }
            });
            t.setDaemon(true);
            t.start();
            ts.add(t);
        }
        for (int i = 0; i < 3; i++)
            while (!Files.exists(dir.resolve("count" + i)) || Files.size(dir.resolve("count" + i)) == 0)
                Thread.sleep(10);
        Files.write(dir.resolve("ready"), (ProcessHandle.current().pid() + "\n").getBytes());
        while (!Files.exists(dir.resolve("stop")))
            Thread.sleep(20);
        for (int i = 0; i < 3; i++) {
            long want = 0;
            for (String l : Files.readAllLines(dir.resolve("count" + i))) {
                if (l.isEmpty())
                    continue;
                if (Long.parseLong(l) != want) {
                    System.out.println("FAIL: count" + i + " has " + l + " where " + want + " was due");
                    System.exit(1);
                }
                want++;
            }
        }
        System.out.println("PASS");
        System.exit(0);
    }
}
