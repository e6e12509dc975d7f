"""Static tables of the household world: room types, receptacle and object types, what fits where.

Everything here is plain data (sets and dicts of type names); the generator and the rules read it.
Receptacle types that start closed are in ``OPENABLE``. ``ACCEPTS[r]`` is the set of object types a
receptacle of type ``r`` takes. Object capabilities (heat, cool, clean, slice) are sets of types.
"""

from __future__ import annotations

ROOM_TYPES = ("kitchen", "livingroom", "bedroom", "bathroom")
ROOM_NAMES = {"kitchen": "kitchen", "livingroom": "living room", "bedroom": "bedroom",
              "bathroom": "bathroom"}

TASK_TYPES = ("pick_and_place_simple", "look_at_obj_in_light", "pick_clean_then_place",
              "pick_heat_then_place", "pick_cool_then_place", "pick_two_obj_and_place")

# which task types a room supports (REFERENCE.md section 1)
ROOM_TASKS = {
    "kitchen": ("pick_and_place_simple", "pick_clean_then_place", "pick_heat_then_place",
                "pick_cool_then_place", "pick_two_obj_and_place"),
    "livingroom": ("pick_and_place_simple", "look_at_obj_in_light", "pick_two_obj_and_place"),
    "bedroom": ("pick_and_place_simple", "look_at_obj_in_light", "pick_two_obj_and_place"),
    "bathroom": ("pick_and_place_simple", "pick_clean_then_place", "pick_two_obj_and_place"),
}

OPENABLE = frozenset({"fridge", "cabinet", "microwave", "drawer", "safe", "box"})
HEATERS = frozenset({"microwave"})
COOLERS = frozenset({"fridge"})
CLEANERS = frozenset({"sinkbasin", "bathtubbasin"})
LAMPS = frozenset({"desklamp"})
KNIVES = frozenset({"knife", "butterknife"})
LAMP_HOLDERS = ("desk", "sidetable", "dresser")

FOOD = {"apple", "bread", "tomato", "potato", "lettuce", "egg"}
DISHES = {"mug", "cup", "plate", "bowl", "pan", "pot", "kettle"}
UTENSILS = {"knife", "butterknife", "fork", "spoon", "spatula", "ladle"}
KITCHEN_MISC = {"saltshaker", "peppershaker", "dishsponge", "soapbottle", "winebottle",
                "glassbottle", "papertowelroll"}
SMALL = {"keychain", "creditcard", "cellphone", "remotecontrol", "watch", "cd", "pen", "pencil"}
READING = {"book", "newspaper"}
DECOR = {"statue", "vase", "candle", "tissuebox"}
BATH = {"soapbar", "soapbottle", "spraybottle", "toiletpaper", "cloth", "handtowel", "towel",
        "dishsponge", "candle", "tissuebox"}
BATH_SMALL = BATH - {"handtowel", "towel"}

ROOM_OBJECTS = {
    "kitchen": sorted(FOOD | DISHES | UTENSILS | KITCHEN_MISC),
    "livingroom": sorted(SMALL - {"cd", "pen", "pencil"} | READING | DECOR
                         | {"pillow", "laptop", "plate", "bowl"}),
    "bedroom": sorted(SMALL - {"remotecontrol"} | READING | {"alarmclock", "laptop", "pillow",
                                                             "teddybear", "mug", "bowl", "cloth",
                                                             "tissuebox", "vase"}),
    "bathroom": sorted(BATH),
}

HEATABLE = frozenset({"apple", "bread", "tomato", "potato", "egg", "mug", "cup", "plate", "bowl"})
COOLABLE = frozenset(FOOD | {"mug", "cup", "plate", "bowl", "pan", "pot", "winebottle"})
CLEANABLE = frozenset({"apple", "tomato", "potato", "lettuce", "egg", "mug", "cup", "plate", "bowl",
                       "pan", "pot", "kettle", "knife", "butterknife", "fork", "spoon", "spatula",
                       "ladle", "dishsponge", "soapbar", "cloth"})
SLICEABLE = frozenset({"apple", "bread", "tomato", "potato", "lettuce"})

_KITCHEN_ALL = FOOD | DISHES | UTENSILS | KITCHEN_MISC
_FURNITURE = SMALL | READING | DECOR | {"laptop", "alarmclock", "mug", "cup", "bowl", "plate",
                                       "teddybear"} | BATH_SMALL
_SEATS = {"pillow", "remotecontrol", "laptop", "book", "newspaper", "keychain", "creditcard",
          "cellphone", "teddybear"}

ACCEPTS: dict[str, frozenset[str]] = {k: frozenset(v) for k, v in {
    "countertop": _KITCHEN_ALL | BATH_SMALL,
    "diningtable": _KITCHEN_ALL | _FURNITURE - {"teddybear"},
    "cabinet": DISHES | KITCHEN_MISC | BATH_SMALL | {"vase", "statue", "book", "newspaper"},
    "drawer": UTENSILS | SMALL | READING | {"cloth", "soapbar", "toiletpaper", "spraybottle",
                                            "candle", "dishsponge", "saltshaker", "peppershaker"},
    "shelf": {"mug", "cup", "bowl", "plate", "kettle", "saltshaker", "peppershaker", "winebottle",
              "glassbottle", "alarmclock"} | SMALL | READING | DECOR | BATH_SMALL,
    "fridge": FOOD | {"mug", "cup", "plate", "bowl", "pan", "pot", "winebottle", "glassbottle"},
    "microwave": FOOD | {"mug", "cup", "plate", "bowl"},
    "sinkbasin": FOOD | DISHES | UTENSILS | {"dishsponge", "soapbar", "cloth"},
    "bathtubbasin": {"soapbar", "cloth", "soapbottle", "spraybottle", "dishsponge"},
    "stoveburner": {"pan", "pot", "kettle"},
    "garbagecan": FOOD | {"papertowelroll", "soapbottle", "spraybottle", "toiletpaper", "cloth",
                          "dishsponge", "tissuebox", "newspaper", "cd", "pen", "pencil",
                          "creditcard", "winebottle", "glassbottle", "soapbar", "candle"},
    "coffeemachine": {"mug"},
    "toaster": {"bread"},
    "sofa": _SEATS,
    "armchair": _SEATS,
    "bed": _SEATS | {"cd", "alarmclock"},
    "coffeetable": _FURNITURE,
    "sidetable": _FURNITURE,
    "desk": _FURNITURE,
    "dresser": _FURNITURE,
    "tvstand": _FURNITURE,
    "safe": {"keychain", "creditcard", "cellphone", "watch", "cd", "statue"},
    "box": {"keychain", "creditcard", "cellphone", "remotecontrol", "watch", "cd", "pen", "pencil"},
    "laundryhamper": {"cloth"},
    "toilet": {"soapbar", "soapbottle", "spraybottle", "toiletpaper", "cloth", "candle", "tissuebox"},
    "towelholder": {"towel"},
    "handtowelholder": {"handtowel"},
    "toiletpaperhanger": {"toiletpaper"},
}.items()}

# receptacle type -> (min count, max count) in a room of that type
ROOM_RECEPTACLES: dict[str, dict[str, tuple[int, int]]] = {
    "kitchen": {"countertop": (1, 3), "cabinet": (2, 8), "drawer": (1, 6), "fridge": (1, 1),
                "microwave": (1, 1), "sinkbasin": (1, 2), "stoveburner": (2, 4),
                "diningtable": (0, 1), "shelf": (0, 3), "garbagecan": (1, 1),
                "coffeemachine": (1, 1), "toaster": (0, 1)},
    "livingroom": {"sofa": (1, 1), "armchair": (0, 2), "coffeetable": (0, 1), "sidetable": (1, 2),
                   "tvstand": (0, 1), "shelf": (0, 4), "drawer": (0, 4), "cabinet": (0, 4),
                   "dresser": (0, 1), "garbagecan": (1, 1), "safe": (0, 1), "box": (0, 1),
                   "diningtable": (0, 1)},
    "bedroom": {"bed": (1, 1), "desk": (0, 1), "dresser": (0, 1), "drawer": (1, 6), "shelf": (0, 4),
                "sidetable": (1, 2), "garbagecan": (1, 1), "safe": (0, 1), "laundryhamper": (0, 1),
                "armchair": (0, 1)},
    "bathroom": {"toilet": (1, 1), "sinkbasin": (1, 2), "bathtubbasin": (0, 1), "countertop": (1, 1),
                 "cabinet": (1, 4), "drawer": (0, 4), "shelf": (0, 2), "towelholder": (0, 1),
                 "handtowelholder": (0, 1), "toiletpaperhanger": (1, 1), "garbagecan": (1, 1),
                 "dresser": (0, 1)},
}

# Synonyms for the paraphrased-goal preset: the goal text uses one of these names, the goal
# check still works on types.
SYNONYMS: dict[str, tuple[str, ...]] = {
    "fridge": ("refrigerator",), "mug": ("coffee mug", "cup of coffee"), "cellphone": ("phone",
                                                                                    "mobile phone"),
    "remotecontrol": ("remote", "tv remote"), "sofa": ("couch",), "garbagecan": ("trash can", "bin"),
    "sinkbasin": ("sink",), "bathtubbasin": ("bathtub", "tub"), "countertop": ("counter",),
    "diningtable": ("dining table", "table"), "coffeetable": ("coffee table",),
    "sidetable": ("side table", "nightstand"), "desklamp": ("desk lamp", "lamp"),
    "keychain": ("keys", "key ring"), "creditcard": ("credit card", "card"),
    "alarmclock": ("alarm clock", "clock"), "stoveburner": ("stove", "burner"),
    "coffeemachine": ("coffee maker",), "laptop": ("notebook computer",), "pillow": ("cushion",),
    "toiletpaper": ("toilet roll",), "spraybottle": ("spray bottle",), "soapbar": ("bar of soap",),
    "soapbottle": ("soap dispenser",), "tissuebox": ("box of tissues",), "teddybear": ("teddy bear",),
    "dresser": ("chest of drawers",), "tvstand": ("tv stand",), "cloth": ("rag",),
    "winebottle": ("wine bottle",), "saltshaker": ("salt shaker",), "peppershaker": ("pepper shaker",),
    "butterknife": ("butter knife",), "dishsponge": ("sponge",), "papertowelroll": ("paper towels",),
    "handtowel": ("hand towel",), "glassbottle": ("glass bottle",), "laundryhamper": ("hamper",),
}
