"""Design tradeoffs: formulas on any config beside what the lab's zoo measured and how noisy its losses are,
the tables the Design tradeoffs page shows, and two tradeoffs timed on this machine."""
