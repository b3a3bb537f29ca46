# started on Sat Dec  5 00:26:02 2026

30.46,msec,task-clock,30456653,100.00,0.988,CPUs utilized
