"""Vocabularies for the generated catalog: departments, product types, attributes, options.

Each department has a category-path root and a few subcategories; each subcategory lists its
product nouns (the search query a product was "found under"), attribute phrases (what goals ask
for: "sulfate free", "water resistant"), "for ..." phrases, and the option groups it offers.
"""

from __future__ import annotations

# WebShop's colour list (web_agent_site/engine/normalize.py, COLOR_SET; MIT licence,
# Copyright (c) 2023 Princeton Natural Language Processing). The reward maps an option value onto
# the FIRST entry that occurs in it as a plain substring, in this order ("dark gray" -> "dark").
WEBSHOP_COLORS = [
    "alabaster", "apricot", "aqua", "ash", "asphalt", "azure", "banana", "beige", "black", "blue",
    "blush", "bordeaux", "bronze", "brown", "burgundy", "camel", "camo", "caramel", "champagne",
    "charcoal", "cheetah", "chestnut", "chocolate", "christmas", "coffee", "cognac", "copper",
    "coral", "cranberry", "cream", "crystal", "dark", "denim", "eggplant", "elephant", "espresso",
    "fuchsia", "gold", "granite", "grape", "graphite", "grass", "gray", "green", "grey", "heather",
    "indigo", "ivory", "ivy", "khaki", "lavender", "lemon", "leopard", "light", "lilac", "lime",
    "magenta", "maroon", "mauve", "merlot", "midnight", "mint", "mocha", "multicolor", "mushroom",
    "mustard", "natural", "navy", "nude", "olive", "orange", "peach", "pewter", "pink", "plum",
    "purple", "rainbow", "red", "rose", "royal", "rust", "sand", "sapphire", "seashell", "silver",
    "skull", "slate", "steel", "stone", "stonewash", "sunflower", "tan", "taupe", "teal", "tiger",
    "turquoise", "violet", "walnut", "wheat", "white", "wine", "yellow",
]
# Base colour words of the generated catalog (what its colour names are built from).
BASE_COLORS = [
    "black", "white", "gray", "grey", "silver", "gold", "red", "pink", "purple", "navy", "blue",
    "green", "yellow", "orange", "brown", "beige", "ivory", "khaki", "teal", "tan", "clear",
    "multicolor", "rose", "coral", "burgundy", "charcoal", "cream",
]

COLORS = [
    "black", "white", "gray", "grey", "silver", "gold", "red", "pink", "purple", "navy", "blue",
    "green", "yellow", "orange", "brown", "beige", "ivory", "khaki", "teal", "tan", "clear",
    "multicolor", "rose", "coral", "burgundy", "charcoal", "cream",
]

COLORS = [
    "black", "white", "navy blue", "light blue", "royal blue", "dark gray", "light gray",
    "heather grey", "silver", "rose gold", "gold", "red", "wine red", "pink", "hot pink",
    "purple", "lavender purple", "green", "olive green", "army green", "mint green", "yellow",
    "mustard yellow", "orange", "brown", "coffee brown", "beige", "ivory white", "khaki", "teal",
    "tan", "clear", "multicolor", "coral", "burgundy", "charcoal", "cream",
]

OPTION_VALUES: dict[str, list[str]] = {
    "apparel_size": ["x-small", "small", "medium", "large", "x-large", "xx-large", "3x-large"],
    "shoe_size": ["6", "6.5", "7", "7.5", "8", "8.5", "9", "9.5", "10", "10.5", "11", "12", "13"],
    "volume": ["2 fl oz", "4 fl oz", "8 fl oz", "12 fl oz", "16 fl oz", "32 fl oz"],
    "weight": ["4 ounce", "8 ounce", "12 ounce", "1 pound", "2 pound", "5 pound"],
    "count": ["pack of 1", "pack of 2", "pack of 3", "pack of 4", "pack of 6", "pack of 12"],
    "bed_size": ["twin", "twin xl", "full", "queen", "king", "california king"],
    "dimension": ["24 x 36 inch", "36 x 48 inch", "48 x 72 inch", "60 x 84 inch", "5 x 7 feet",
                  "8 x 10 feet"],
    "capacity": ["16gb", "32gb", "64gb", "128gb", "256gb", "512gb", "1tb"],
    "length": ["3 feet", "6 feet", "10 feet", "15 feet", "25 feet"],
    "scent": ["lavender", "vanilla", "coconut", "unscented", "eucalyptus mint", "citrus",
              "rose", "sandalwood", "fresh linen"],
    "flavor": ["chocolate", "vanilla bean", "strawberry", "sea salt", "honey roasted",
               "original", "peanut butter", "cinnamon", "spicy chili", "lemon"],
    "style": ["classic", "modern", "vintage", "sport", "slim", "deluxe", "basic"],
    "material": ["cotton", "linen", "polyester", "leather", "stainless steel", "bamboo", "wood",
                 "silicone", "ceramic", "glass"],
}

BRAND_PARTS = (
    ["lu", "ve", "ka", "mo", "ze", "ri", "sa", "no", "ta", "bel", "cor", "dax", "fen", "gal",
     "hal", "jun", "kel", "mar", "nor", "pel", "quin", "ros", "sol", "tor", "val", "wyn"],
    ["ra", "lo", "xa", "mi", "na", "vo", "ti", "ly", "do", "ne", "ka", "ru", "se", "po"],
    ["", "", "x", "n", "ly", "ia", "on", "et", "ix", "ora", "ex", "ar"],
)

GENERIC_ADJECTIVES = ["premium", "professional", "lightweight", "durable", "compact", "portable",
                      "soft", "classic", "modern", "everyday", "ultra", "heavy duty", "deluxe",
                      "natural", "new", "upgraded"]

# department -> (category-path root, {subcategory: spec})
# spec: nouns, attributes (goal-able phrases), uses ("for ..." phrases), options (group -> kind)
DEPARTMENTS: dict[str, tuple[str, dict[str, dict]]] = {
    "beauty": ("Beauty & Personal Care", {
        "Hair Care": {
            "nouns": ["shampoo", "conditioner", "hair mask", "hair oil", "dry shampoo", "hair serum"],
            "attributes": ["sulfate free", "paraben free", "cruelty free", "natural ingredients",
                           "long lasting", "for dry hair", "color safe", "argan oil", "vegan"],
            "uses": ["curly hair", "damaged hair", "fine hair", "dry scalp", "color treated hair"],
            "options": {"size": "volume", "scent": "scent"},
        },
        "Skin Care": {
            "nouns": ["face moisturizer", "face serum", "sunscreen", "eye cream", "face cleanser",
                      "body lotion"],
            "attributes": ["fragrance free", "hyaluronic acid", "spf 50", "oil free", "non comedogenic",
                           "dermatologist tested", "vitamin c", "sensitive skin", "cruelty free"],
            "uses": ["oily skin", "dry skin", "sensitive skin", "acne prone skin", "mature skin"],
            "options": {"size": "volume", "scent": "scent"},
        },
        "Makeup": {
            "nouns": ["lipstick", "mascara", "foundation", "eyeliner", "eyeshadow palette",
                      "makeup brush set"],
            "attributes": ["long lasting", "waterproof", "cruelty free", "highly pigmented",
                           "easy to apply", "smudge proof", "paraben free", "travel size"],
            "uses": ["everyday wear", "sensitive eyes", "all skin types", "party makeup"],
            "options": {"color": "color"},
        },
        "Tools & Accessories": {
            "nouns": ["hair dryer", "flat iron", "curling iron", "nail clipper", "makeup mirror",
                      "hair brush"],
            "attributes": ["ceramic coating", "fast drying", "easy to use", "travel size",
                           "stainless steel", "led light", "auto shut off", "ionic"],
            "uses": ["home salon", "travel", "thick hair", "daily use"],
            "options": {"color": "color", "style": "style"},
        },
    }),
    "electronics": ("Electronics", {
        "Headphones": {
            "nouns": ["wireless earbuds", "headphones", "gaming headset", "sports earphones"],
            "attributes": ["noise cancelling", "bluetooth 5.0", "long battery life", "water resistant",
                           "built in microphone", "fast charging", "hands free", "high fidelity"],
            "uses": ["running", "gaming", "travel", "working from home"],
            "options": {"color": "color"},
        },
        "Computer Accessories": {
            "nouns": ["usb flash drive", "wireless mouse", "mechanical keyboard", "laptop stand",
                      "usb c hub", "webcam"],
            "attributes": ["plug and play", "high speed", "ergonomic design", "rgb backlit",
                           "usb 3.0", "easy to install", "aluminum alloy", "quick release"],
            "uses": ["laptop", "macbook", "home office", "gaming pc"],
            "options": {"color": "color", "capacity": "capacity"},
        },
        "Cables & Chargers": {
            "nouns": ["usb c cable", "phone charger", "hdmi cable", "power bank", "charging station"],
            "attributes": ["fast charging", "braided nylon", "high speed", "durable", "4k hdr",
                           "gold plated", "compact size", "overcharge protection"],
            "uses": ["iphone", "android phones", "tv", "tablets"],
            "options": {"color": "color", "size": "length"},
        },
        "Smart Home": {
            "nouns": ["smart plug", "security camera", "video doorbell", "smart bulb", "wifi extender"],
            "attributes": ["easy to install", "works with alexa", "night vision", "motion detection",
                           "two way audio", "energy saving", "remote control", "1080p hd"],
            "uses": ["home security", "living room", "outdoor use", "baby monitoring"],
            "options": {"count": "count", "color": "color"},
        },
    }),
    "fashion": ("Clothing, Shoes & Jewelry", {
        "Men's Clothing": {
            "nouns": ["t-shirt", "polo shirt", "hoodie", "jeans", "cargo shorts", "dress shirt"],
            "attributes": ["machine wash", "slim fit", "relaxed fit", "cotton blend", "moisture wicking",
                           "short sleeve", "long sleeve", "button closure", "quick drying"],
            "uses": ["men", "casual wear", "workout", "office"],
            "options": {"color": "color", "size": "apparel_size"},
        },
        "Women's Clothing": {
            "nouns": ["maxi dress", "blouse", "cardigan", "yoga pants", "tank top", "pajama set"],
            "attributes": ["machine wash", "high waist", "loose fit", "soft fabric", "v neck",
                           "elastic waistband", "button down", "pockets", "hand wash only"],
            "uses": ["women", "summer", "lounge wear", "party"],
            "options": {"color": "color", "size": "apparel_size"},
        },
        "Shoes": {
            "nouns": ["running shoes", "sneakers", "slippers", "hiking boots", "sandals", "loafers"],
            "attributes": ["non slip", "rubber sole", "memory foam", "arch support", "breathable mesh",
                           "lightweight", "waterproof", "lace up closure", "slip on"],
            "uses": ["men", "women", "walking", "outdoor"],
            "options": {"color": "color", "size": "shoe_size"},
        },
        "Jewelry & Watches": {
            "nouns": ["necklace", "earrings", "bracelet", "wrist watch", "ring"],
            "attributes": ["sterling silver", "hypoallergenic", "gift box", "adjustable", "water resistant",
                           "stainless steel", "gold plated", "quartz movement"],
            "uses": ["women", "men", "anniversary gift", "everyday wear"],
            "options": {"color": "color", "style": "style"},
        },
    }),
    "grocery": ("Grocery & Gourmet Food", {
        "Snacks": {
            "nouns": ["potato chips", "trail mix", "protein bars", "beef jerky", "popcorn", "mixed nuts"],
            "attributes": ["gluten free", "non gmo", "high protein", "low sugar", "keto friendly",
                           "individually wrapped", "kosher", "no artificial flavors", "plant based"],
            "uses": ["kids", "office snacks", "road trips", "lunch boxes"],
            "options": {"flavor": "flavor", "size": "weight"},
        },
        "Beverages": {
            "nouns": ["green tea", "ground coffee", "sparkling water", "hot cocoa mix", "energy drink"],
            "attributes": ["caffeine free", "sugar free", "organic", "fair trade", "zero calorie",
                           "non gmo", "natural flavors", "single serve"],
            "uses": ["breakfast", "iced drinks", "camping", "office"],
            "options": {"flavor": "flavor", "count": "count"},
        },
        "Pantry Staples": {
            "nouns": ["olive oil", "pasta sauce", "honey", "peanut butter", "rice", "spice set"],
            "attributes": ["organic", "gluten free", "non gmo", "cold pressed", "no preservatives",
                           "low sodium", "kosher", "vegan", "raw"],
            "uses": ["cooking", "baking", "salads", "families"],
            "options": {"size": "weight", "flavor": "flavor"},
        },
        "Candy & Chocolate": {
            "nouns": ["dark chocolate", "gummy candy", "chocolate truffles", "hard candy", "mints"],
            "attributes": ["individually wrapped", "gluten free", "sugar free", "gift box", "kosher",
                           "fat free", "nut free", "valentine day"],
            "uses": ["gift baskets", "parties", "holidays", "birthdays"],
            "options": {"flavor": "flavor", "count": "count"},
        },
    }),
    "home": ("Home & Kitchen", {
        "Bedding": {
            "nouns": ["sheet set", "comforter", "duvet cover", "pillow", "mattress topper", "blanket"],
            "attributes": ["machine washable", "deep pocket", "hypoallergenic", "breathable",
                           "microfiber", "wrinkle free", "all season", "memory foam"],
            "uses": ["bedroom", "guest room", "kids room", "hot sleepers"],
            "options": {"color": "color", "size": "bed_size"},
        },
        "Kitchen & Dining": {
            "nouns": ["frying pan", "knife set", "cutting board", "coffee mug", "food storage containers",
                      "mixing bowls"],
            "attributes": ["dishwasher safe", "non stick", "bpa free", "easy to clean", "oven safe",
                           "stainless steel", "heat resistant", "microwave safe"],
            "uses": ["home kitchen", "meal prep", "restaurants", "camping"],
            "options": {"color": "color", "count": "count"},
        },
        "Furniture": {
            "nouns": ["office chair", "coffee table", "bookshelf", "tv stand", "bar stool",
                      "accent chair", "nightstand"],
            "attributes": ["easy assembly", "solid wood", "metal frame", "storage space", "mid century",
                           "height adjustable", "living room furniture", "high density foam"],
            "uses": ["living room", "bedroom", "home office", "small spaces"],
            "options": {"color": "color", "material": "material"},
        },
        "Home Decor": {
            "nouns": ["area rug", "curtains", "wall art", "throw pillow covers", "table lamp",
                      "scented candle"],
            "attributes": ["machine washable", "blackout", "non slip", "ready to hang", "farmhouse style",
                           "energy efficient", "fade resistant", "handmade"],
            "uses": ["living room", "bedroom", "dining room", "nursery"],
            "options": {"color": "color", "size": "dimension"},
        },
    }),
    "sports": ("Sports & Outdoors", {
        "Exercise & Fitness": {
            "nouns": ["yoga mat", "resistance bands", "dumbbells", "jump rope", "foam roller",
                      "kettlebell"],
            "attributes": ["non slip", "extra thick", "eco friendly", "portable", "anti burst",
                           "adjustable", "sweat resistant", "carrying strap"],
            "uses": ["home gym", "pilates", "physical therapy", "strength training"],
            "options": {"color": "color", "size": "weight"},
        },
        "Camping & Hiking": {
            "nouns": ["camping tent", "sleeping bag", "hiking backpack", "camping lantern",
                      "water bottle"],
            "attributes": ["waterproof", "lightweight", "easy setup", "insulated", "bpa free",
                           "rechargeable", "leak proof", "compact size"],
            "uses": ["camping", "hiking", "backpacking", "emergencies"],
            "options": {"color": "color", "style": "style"},
        },
        "Cycling": {
            "nouns": ["bike helmet", "bike light", "bike lock", "cycling gloves", "bike pump"],
            "attributes": ["usb rechargeable", "adjustable fit", "high visibility", "shock absorbing",
                           "anti theft", "easy to install", "padded", "weather resistant"],
            "uses": ["road bikes", "mountain bikes", "commuting", "kids"],
            "options": {"color": "color", "size": "apparel_size"},
        },
    }),
    "pets": ("Pet Supplies", {
        "Dogs": {
            "nouns": ["dog bed", "dog leash", "dog collar", "dog toy", "dog food", "dog harness"],
            "attributes": ["machine washable", "orthopedic", "reflective", "durable", "grain free",
                           "adjustable", "non toxic", "chew resistant"],
            "uses": ["small dogs", "large dogs", "puppies", "senior dogs"],
            "options": {"color": "color", "size": "apparel_size"},
        },
        "Cats": {
            "nouns": ["cat tree", "cat litter", "cat toy", "scratching post", "cat food", "cat bed"],
            "attributes": ["odor control", "natural ingredients", "easy to clean", "grain free",
                           "interactive", "sturdy base", "clumping", "high protein"],
            "uses": ["indoor cats", "kittens", "senior cats", "large cats"],
            "options": {"flavor": "flavor", "size": "weight"},
        },
    }),
}

REVIEW_TITLES = ["Great value", "Works as described", "Not bad", "Love it", "Exactly what I needed",
                 "Decent quality", "Would buy again", "Could be better", "Five stars", "Good gift"]
REVIEW_BODIES = [
    "The {noun} arrived quickly and works as described.",
    "I have used this {noun} for a few weeks now and I am happy with it.",
    "Good {noun} for the price, though the packaging could be better.",
    "My family loves this {noun}. It is {attribute} as promised.",
    "Quality is fine but it took a while to arrive.",
    "Bought this as a gift and they were very pleased with the {noun}.",
]
