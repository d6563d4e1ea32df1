CREATE TABLE `agent_rates` (
	`token_name` text PRIMARY KEY NOT NULL,
	`tokens` real NOT NULL,
	`taken_at` real NOT NULL
);
