from turngym.cli import main

raise SystemExit(main())
