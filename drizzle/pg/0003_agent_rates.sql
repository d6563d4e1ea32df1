CREATE TABLE "agent_rates" (
	"token_name" text COLLATE "C" PRIMARY KEY NOT NULL,
	"tokens" double precision NOT NULL,
	"taken_at" double precision NOT NULL
);
